"""CLI commands for pretraining: ``pretrain`` and ``init-config``."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import srsly
import typer

from ..files import replacing
from .errors import fail, failing, recorded

#: typer settings of a command that takes config overrides as extra arguments.
EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def config_overrides(args: Sequence[str]) -> Dict[str, Any]:
    """Extra command-line arguments -> config overrides, as spaCy's commands read them:
    ``--section.key value`` or ``--section.key=value``; a value is JSON where it parses
    (``500``, ``null``, ``[1, 2]``), else a string; a key with no value is ``true``."""
    overrides: Dict[str, Any] = {}
    args = list(args)
    while args:
        arg = args.pop(0)
        if not arg.startswith("--"):
            raise ValueError(f"config override {arg!r}: expected --section.key VALUE")
        key, has_value, value = arg[2:].partition("=")
        if "." not in key:
            raise ValueError(f"config override {arg!r}: name a key inside a section, e.g. --training.max_steps")
        if not has_value:
            value = "true" if not args or args[0].startswith("--") else args.pop(0)
        try:
            overrides[key.replace("-", "_")] = srsly.json_loads(value)
        except ValueError:
            overrides[key.replace("-", "_")] = value
    return overrides


@recorded
def pretrain_command(
    ctx: typer.Context,
    config_path: Path = typer.Argument(
        ...,
        help="Pretraining config (see init-config); with --resume, the run's own OUTPUT_DIR/config.cfg is "
        "read instead",
        exists=True,
        dir_okay=False,
    ),
    output_dir: Path = typer.Argument(..., help="Where the model, metrics and checkpoints go"),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU to use; -1 for the CPU"),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue the run in output_dir from its checkpoint, as its own config.cfg records it "
        "(paths, overrides, max_steps); overrides given now may change only how long it runs, how "
        "often it logs, evaluates and saves, its held-out text and threads",
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", min=1, help="CPU threads for torch (sets the config's system.threads)"
    ),
) -> None:
    """Pretrain an ELMo biLM. Config values can be overridden: --training.max_steps 500.

    Data parallel: torchrun --nproc-per-node N -m spacy_elmo pretrain CONFIG OUT [--gpu-id 0]
    """
    from ..distributed import env_rank
    from ..pretrain.config import load_config
    from ..pretrain.resume import resume_command, resumed_config
    from ..pretrain.summary import run_summary
    from ..pretrain.trainer import TrainingInterrupted, pretrain

    speak = env_rank() == 0
    try:
        overrides = config_overrides(ctx.args)
        if threads is not None:
            overrides["system.threads"] = threads
        if resume:
            config, changes = resumed_config(output_dir, overrides)
            if speak:
                typer.echo(f"Resuming {output_dir} as its {output_dir / 'config.cfg'} records it", err=True)
                for change in changes:
                    typer.echo(f"  changed on resume: {change}", err=True)
        else:
            config = load_config(config_path, overrides)
        out = pretrain(config, output_dir, gpu_id=gpu_id, resume=resume)
    except TrainingInterrupted as stop:
        if speak:
            typer.echo(f"{stop}\nContinue it with: {resume_command(output_dir, gpu_id)}", err=True)
        raise typer.Exit(130) from None  # the shell's code for a Ctrl-C'd command
    except (ValueError, FileNotFoundError, FileExistsError) as err:  # names the key or file
        fail(str(err))
    if speak:
        typer.echo(run_summary(out))


def init_config_command(
    output_file: Path = typer.Argument(..., help="Where to write the pretraining config"),
    recipe: str = typer.Option(
        "default",
        "--recipe",
        help="default: a small biLM that trains on a CPU; bilm-tf: the released original shape as "
        "bilm-tf trained it (clipped LSTMs, windows of running text, Adagrad); fast: bilm-tf without "
        "clipping, which lets cuDNN's fused LSTM run on a GPU",
    ),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        show_default=False,
        help="Continue pretraining this biLM: a model directory (released or pretrained) or the name "
        "of a downloaded model (small, medium, ...). Its shape goes into "
        "the config's model section and the run starts from its weights",
    ),
) -> None:
    """Write a documented pretraining config (--recipe: default, bilm-tf or fast)."""
    from ..options import BiLMOptions
    from ..pretrain.config import RECIPES, config_text, config_text_for_model, load_config
    from ..sources import resolve_weight_source

    if recipe not in RECIPES:
        fail(f"--recipe {recipe!r}: choose one of {', '.join(RECIPES)}")
    text = config_text(recipe)
    if model is not None:
        with failing(ValueError, FileNotFoundError):  # the check the run would make at its start, now
            source = resolve_weight_source(model, what="--model")
        text = config_text_for_model(BiLMOptions.from_file(source.options_file), model, recipe)
    with replacing(output_file) as temporary:
        temporary.write_text(text, encoding="utf-8")
    typer.echo(f"Wrote {output_file}. Train it (GPU recipes: add --gpu-id 0):")
    typer.echo(
        f"    python -m spacy_elmo pretrain {shlex.quote(str(output_file))} OUT_DIR --paths.train TRAIN.txt "
        "--paths.dev DEV.txt --training.max_steps 2000"
    )
    max_steps = load_config(output_file)["training"]["max_steps"]
    typer.echo(f"(the config's max_steps is {max_steps}; --training.max_steps sets the length)")


def plot_curve_command(
    metrics_file: Path = typer.Argument(
        ..., help="metrics.jsonl of a pretraining run", exists=True
    ),
    output_png: Path = typer.Argument(..., help="Where to write the PNG"),
) -> None:
    """Plot a pretraining run's learning curve (needs matplotlib: the package's 'plot' extra)."""
    from .plot_curve import plot_learning_curve

    with failing(ImportError):
        typer.echo(f"Wrote {plot_learning_curve(metrics_file, output_png)}")


def evaluate_lm_command(
    run_dir: Path = typer.Argument(..., help="Output directory of a pretraining run", exists=True, file_okay=False),
    text: List[str] = typer.Argument(..., help="Held-out text: files, directories or globs"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Stop after the sentence that reaches this many tokens (whole sentences are scored)"),
    gpu_id: int = typer.Option(-1, "--gpu-id", "-g", help="GPU to use; -1 for the CPU"),
) -> None:
    """Held-out perplexity (forward, backward, average; full softmax) of a pretrained biLM."""
    from ..pretrain.evaluate import evaluate_run

    with failing(ValueError, FileNotFoundError):  # a missing or empty held-out file, a bad run
        result = evaluate_run(run_dir, text, max_tokens, gpu_id)
    typer.echo(
        f"perplexity on {result.tokens:,} targets: forward {result.ppl_forward:.2f}, "
        f"backward {result.ppl_backward:.2f}, average {result.ppl_average:.2f}"
    )
