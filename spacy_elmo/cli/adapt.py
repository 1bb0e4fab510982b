"""``adapt``: a biLM adapted to your own text; the work is ``spacy_elmo.pretrain.adapt``'s."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from ..pretrain.adapt import ADAPT_CONFIG, adapt_settings
from .errors import fail, failing

#: The package's recipe: the defaults the options' help gives.
RECIPE = adapt_settings()


def adapt_command(
    source: str = typer.Argument(
        ...,
        help="The biLM to adapt: en_wikitext_small (the bundled model), a released or downloaded "
        "model's name (python -m spacy_elmo list), or a model directory (a pretraining or adapt output)",
    ),
    texts: List[Path] = typer.Argument(
        ...,
        help="Your text: plain text files (one sentence or paragraph a line), .spacy files, JSONL "
        'of labelled texts ({"text": ..., "label"/"cats": ...}; the labels are not used), or folders of them',
        show_default=False,
    ),
    output_dir: Path = typer.Argument(..., help="Where the adapted biLM goes (a new directory)"),
    config: Optional[Path] = typer.Option(
        None, "--config", show_default=False,
        help=f"Your own adapt recipe (a copy of {ADAPT_CONFIG.name}, python -m spacy_elmo adapt --help lists "
        "its keys as the options below; default: the package's); the options given override its keys",
    ),
    tokenized: Optional[bool] = typer.Option(
        None, "--tokenized", show_default=False,
        help="Plain text is already tokenized: split lines on whitespace (default: spaCy's tokenizer for --lang)",
    ),
    lang: Optional[str] = typer.Option(None, "--lang", show_default=False, help=f"The language of spaCy's tokenizer (plain text, JSONL; default {RECIPE.lang})"),
    holdout: Optional[float] = typer.Option(
        None, "--holdout", show_default=False,
        help=f"Share of the sentences held out for the perplexity that decides when to stop (0.01 to 0.5; default {RECIPE.holdout:g})",
    ),
    max_steps: Optional[int] = typer.Option(
        None, "--max-steps", show_default=False,
        help=f"Most updates of the whole biLM (the learning rate falls linearly to 0 there; default: {RECIPE.passes:g} "
        f"passes over the training text, at least {RECIPE.min_steps}; the held-out perplexity usually stops it first)",
    ),
    softmax_max_steps: Optional[int] = typer.Option(
        None, "--softmax-max-steps", show_default=False,
        help=f"Most updates of the softmax fit, for a source without a softmax (default: {RECIPE.softmax_passes:g} passes "
        f"over the training text, at least {RECIPE.softmax_min_steps}; fewer leave the \"before\" partly fitted)",
    ),
    learning_rate: Optional[float] = typer.Option(
        None, "--learning-rate", show_default=False, help=f"Peak learning rate of the whole biLM (Adam; default {RECIPE.learning_rate:g})"
    ),
    dropout: Optional[float] = typer.Option(
        None, "--dropout", show_default=False, help=f"Dropout of the whole biLM while it adapts (0 to 0.9; default {RECIPE.dropout:g})"
    ),
    eval_every: Optional[int] = typer.Option(
        None, "--eval-every", show_default=False, help=f"Updates between held-out evaluations (default {RECIPE.eval_every})"
    ),
    patience: Optional[int] = typer.Option(
        None, "--patience", show_default=False,
        help=f"Stop after this many evaluations without a lower held-out perplexity (default {RECIPE.patience})",
    ),
    seed: Optional[int] = typer.Option(
        None, "--seed", show_default=False, help=f"Seed of the held-out split, the data order and dropout (default {RECIPE.seed})"
    ),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, show_default=False, help=f"CPU threads for torch (default {RECIPE.threads})"),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted adaptation in OUTPUT_DIR (same arguments)"),
) -> None:
    """Adapt a biLM to your own text (continued pretraining, the ELMo paper's fine-tuning of the
    biLM on the task's text), stopping when held-out perplexity stops falling.

    Fits a softmax first when the source has none (the bundled and released models), with the
    biLM frozen: its held-out perplexity is the "before". Ctrl-C saves a checkpoint; --resume
    continues. The output directory is a biLM for the elmo pipe ("weights": OUTPUT_DIR) and for
    python -m spacy_elmo config --weights OUTPUT_DIR. Each option sets the key of the recipe
    file's adapt section with its name (--max-steps: max_steps).

    A lower perplexity is not a better component: on the three tasks measured, components on the
    adapted biLM were not ahead of those on the unadapted one (docs/guide/own-data.md says why);
    compare both on your dev set.
    """
    from ..pretrain.adapt import adapt
    from ..pretrain.summary import format_duration
    from ..pretrain.trainer import TrainingInterrupted

    given = {
        "tokenized": tokenized, "lang": lang, "holdout": holdout, "max_steps": max_steps,
        "softmax_max_steps": softmax_max_steps, "learning_rate": learning_rate, "dropout": dropout,
        "eval_every": eval_every, "patience": patience, "seed": seed, "threads": threads,
    }  # fmt: skip
    with failing(ValueError):  # a ConfigError: the file, every wrong key
        settings = adapt_settings(config, {key: value for key, value in given.items() if value is not None})
    try:
        result = adapt(source, texts, output_dir, settings, resume=resume, echo=typer.echo)
    except TrainingInterrupted as stop:
        command = adapt_line(source, texts, output_dir, {**given, "config": config, "resume": True})
        typer.echo(f"{stop}\nContinue it with: {command}", err=True)
        raise typer.Exit(130) from None  # the shell's code for a Ctrl-C'd command
    except (ValueError, FileNotFoundError, FileExistsError) as err:  # names the file or option
        fail(str(err))
    typer.echo(
        f"Held-out perplexity: {result.ppl_before:.2f} before, {result.ppl_after:.2f} after "
        f"({result.change:+.1%}); {result.steps} updates of the whole biLM, {format_duration(result.seconds)} in all"
    )
    if result.ppl_after >= result.ppl_before:
        typer.echo(
            "The adaptation did not lower the held-out perplexity: the source biLM is as good on "
            "this text; more text of the domain, or a lower --learning-rate, may help"
            + (" (the output holds the source biLM, unchanged)" if result.kept_source else "")
        )
    typer.echo(
        f"Adapted biLM in {output_dir}. A component on it, to compare with one on the unadapted biLM "
        "(same config, budget and seed) on your dev set:\n" + "\n".join(f"  {line}" for line in next_steps(output_dir))
    )


def adapt_line(source: str, texts: List[Path], output_dir: Path, options: Dict[str, Any]) -> str:
    """The ``adapt`` command with these arguments and ``options`` (``{"max_steps": 4}``: the key's
    option, ``--max-steps 4``; a true flag alone; None left out), for the shell."""
    words = ["python", "-m", "spacy_elmo", "adapt", source, *map(str, texts), str(output_dir)]
    for key, value in options.items():
        if value is True:
            words.append(f"--{key.replace('_', '-')}")
        elif value is not None and value is not False:
            words += [f"--{key.replace('_', '-')}", str(value)]
    return shlex.join(words)


def next_steps(output_dir: Path) -> List[str]:
    """The commands that train a component on the adapted biLM: a config, then spaCy's training
    on one op thread with a first run's step budget."""
    weights = shlex.quote(str(output_dir))
    return [
        f"python -m spacy_elmo config train.cfg --pipeline COMPONENTS --train TRAIN --dev DEV --weights {weights}",
        "OMP_NUM_THREADS=1 python -m spacy train train.cfg --output my_model --training.max_steps 2000",
    ]
