"""``python -m spacy_elmo``: the command-line interface (typer).

Every command is a module of this package, named after it; ``COMMANDS`` is their index. A command's
module (PyTorch, spaCy: seconds of start-up) is imported only when it runs or shows its own
``--help``; the app's ``--help`` lists the index's summaries.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional

import typer
from typer.core import TyperCommand

from .help import HelpGroup, prepare_help

#: Words the commands' help uses, said once for the whole tool (each item one line: rich wraps it).
GLOSSARY = "\n".join([
    "Words used in the commands' help:",
    "",
    "- bilm-tf: the released ELMo models' format (options.json + weights.hdf5), named after the TensorFlow "
    "code that trained them; AllenNLP reads it.",
    "- native checkpoint: this package's own format (options.json + model.safetensors), what pretrain "
    "writes; convert turns one into the other.",
    "- rank: one of the processes torchrun starts for a sharded run (embed, pretrain), numbered from 0.",
])


@dataclass(frozen=True)
class Entry:
    """Where a command lives (``module:attribute``) and the summary ``--help`` lists for it."""

    target: str
    summary: str
    extra_args: bool = False  # takes config overrides (--training.max_steps 500) as extra arguments


COMMANDS: Dict[str, Entry] = {
    "demo": Entry("spacy_elmo.cli.demo:demo", "Show which senses of ambiguous words the vectors tell apart, measured."),
    "embed": Entry(
        "spacy_elmo.cli.embed:embed",
        "Write ELMo vectors of a text or .spacy file to HDF5, as AllenNLP's elmo command did; in one "
        "process, or sharded over many under torchrun (one GPU, or one CPU thread, per rank): torchrun "
        "--nproc-per-node N -m spacy_elmo embed INPUT OUT.hdf5 ...",
    ),
    "convert": Entry(
        "spacy_elmo.cli.convert:convert",
        "Convert a released (bilm-tf HDF5) model to a native checkpoint, or back; or an ELMoForManyLangs "
        "model directory to a native checkpoint. SOURCE may name a downloaded model (python -m "
        "spacy_elmo list).",
    ),
    "pretrain": Entry(
        "spacy_elmo.cli.pretrain:pretrain_command",
        "Pretrain an ELMo biLM. Config values can be overridden: --training.max_steps 500.",
        extra_args=True,
    ),
    "init-config": Entry(
        "spacy_elmo.cli.pretrain:init_config_command", "Write a documented pretraining config (--recipe: default, bilm-tf or fast)."
    ),
    "plot-curve": Entry(
        "spacy_elmo.cli.pretrain:plot_curve_command",
        "Plot a pretraining run's learning curve (needs matplotlib: the package's 'plot' extra).",
    ),
    "evaluate-lm": Entry(
        "spacy_elmo.cli.pretrain:evaluate_lm_command",
        "Held-out perplexity (forward, backward, average; full softmax) of a pretrained biLM.",
    ),
    "adapt": Entry(
        "spacy_elmo.cli.adapt:adapt_command",
        "Adapt a biLM to your own text (continued pretraining, the ELMo paper's fine-tuning of the "
        "biLM on the task's text), stopping when held-out perplexity stops falling.",
    ),
    "config": Entry(
        "spacy_elmo.cli.config:config_command",
        "Write a spaCy training config for components on ELMo, as spacy init config does for spaCy's own: "
        "python -m spacy train CONFIG --output MODEL_DIR trains it.",
    ),
    "convert-textcat": Entry(
        "spacy_elmo.cli.convert_textcat:convert_textcat_command",
        "Convert labelled texts in JSONL (spaCy's text classification format) to .spacy files.",
    ),
    "inspect": Entry(
        "spacy_elmo.cli.inspect:inspect_command",
        "The layer mix each ELMo listener learned: which biLM layers the tagger, the NER and the other "
        "components chose (the paper's analysis), as a table, and with --plot as a chart. Several "
        "pipelines (a tagger's and an NER's model-best) share one table and chart.",
    ),
    "download": Entry("spacy_elmo.cli.hub:download_cli", "Download an ELMo model into the cache, once."),
    "list": Entry("spacy_elmo.cli.hub:list_cli", "Show the cached models: name, size, shape, path, state."),
    "bench": Entry(
        "spacy_elmo.cli.bench:bench_command",
        "Measure the elmo pipe's tokens/s and peak memory on this machine, per precision and thread count, "
        "each cell in a fresh process; ratios are to the first cell.",
    ),
}


def load_command(name: str) -> Any:
    """The command (or group) of ``COMMANDS[name]`` as click runs it, its module imported now."""
    entry = COMMANDS[name]
    module, _, attribute = entry.target.partition(":")
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        return typer.main.get_command(prepare_help(target))
    settings = None
    if entry.extra_args:
        from .pretrain import EXTRA_ARGS as settings
    single = typer.Typer(add_completion=False)
    single.command(name, context_settings=settings)(target)
    return typer.main.get_command(prepare_help(single))


class _LoadedOnLookup(Mapping):
    """The app's commands by name, each loaded when looked up (all named, for typo hints)."""

    def __getitem__(self, name: str) -> Any:
        if name not in COMMANDS:
            raise KeyError(name)
        return load_command(name)

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class LazyCommands(HelpGroup):
    """The app's group: commands load on lookup; the app's help lists ``COMMANDS``' summaries."""

    _listing = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _LoadedOnLookup()

    def list_commands(self, ctx: typer.Context) -> List[str]:
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Optional[Any]:
        if self._listing and cmd_name in COMMANDS:
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary)
        return self.commands.get(cmd_name)

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        self._listing = True  # the summaries only
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"spacy-elmo {__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="spacy_elmo",
    cls=LazyCommands,
    help="ELMo for spaCy: embed text, convert weight files, pretrain biLMs, benchmark.\n\n" + GLOSSARY,
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Show the version and exit."
    ),
) -> None:
    """(The app's own options; its help is the Typer's.)"""


prepare_help(app)


def main() -> None:
    app()
