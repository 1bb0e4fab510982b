"""``adapt``: a biLM adapted to your own text; the work is ``spacy_elmo.pretrain.adapt``'s."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..pretrain.adapt import AdaptSettings
from .errors import fail

DEFAULTS = AdaptSettings()


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
    tokenized: bool = typer.Option(
        False, "--tokenized", help="Plain text is already tokenized: split lines on whitespace (default: spaCy's tokenizer for --lang)"
    ),
    lang: str = typer.Option("en", "--lang", help="The language of spaCy's tokenizer (plain text, JSONL)"),
    holdout: float = typer.Option(DEFAULTS.holdout, "--holdout", min=0.01, max=0.5, help="Share of the sentences held out for the perplexity that decides when to stop"),
    max_steps: Optional[int] = typer.Option(
        None, "--max-steps", min=1, show_default=False,
        help=f"Most updates of the whole biLM (the learning rate falls linearly to 0 there; default: {DEFAULTS.passes:g} "
        f"passes over the training text, at least {DEFAULTS.min_steps}; the held-out perplexity usually stops it first)",
    ),
    softmax_max_steps: Optional[int] = typer.Option(
        None, "--softmax-max-steps", min=1, show_default=False,
        help=f"Most updates of the softmax fit, for a source without a softmax (default: {DEFAULTS.softmax_passes:g} passes "
        f"over the training text, at least {DEFAULTS.softmax_min_steps}; the held-out perplexity usually stops it first)",
    ),
    learning_rate: float = typer.Option(DEFAULTS.learning_rate, "--learning-rate", min=0.0, help="Peak learning rate of the whole biLM (Adam)"),
    dropout: float = typer.Option(DEFAULTS.dropout, "--dropout", min=0.0, max=0.9, help="Dropout of the whole biLM while it adapts"),
    eval_every: int = typer.Option(DEFAULTS.eval_every, "--eval-every", min=1, help="Updates between held-out evaluations"),
    patience: int = typer.Option(DEFAULTS.patience, "--patience", min=1, help="Stop after this many evaluations without a lower held-out perplexity"),
    seed: int = typer.Option(DEFAULTS.seed, "--seed", help="Seed of the held-out split, the data order and dropout"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="CPU threads for torch (default 1)"),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted adaptation in OUTPUT_DIR (same arguments)"),
) -> None:
    """Adapt a biLM to your own text (continued pretraining, the ELMo paper's fine-tuning of the
    biLM on the task's text), stopping when held-out perplexity stops falling.

    Fits a softmax first when the source has none (the bundled and released models), with the
    biLM frozen: its held-out perplexity is the "before". Ctrl-C saves a checkpoint; --resume
    continues. The output directory is a biLM for the elmo pipe ("weights": OUTPUT_DIR) and for
    python -m spacy_elmo config --weights OUTPUT_DIR.
    """
    from ..pretrain.adapt import adapt
    from ..pretrain.summary import format_duration
    from ..pretrain.trainer import TrainingInterrupted

    settings = AdaptSettings(
        holdout=holdout,
        max_steps=max_steps,
        softmax_max_steps=softmax_max_steps,
        learning_rate=learning_rate,
        dropout=dropout,
        eval_every=eval_every,
        patience=patience,
        seed=seed,
        threads=threads or 1,
        tokenized=tokenized,
        lang=lang,
    )
    try:
        result = adapt(source, texts, output_dir, settings, resume=resume, echo=typer.echo)
    except TrainingInterrupted:
        typer.echo(
            f"interrupted: checkpoint saved in {output_dir}; continue with the same command and --resume",
            err=True,
        )
        raise typer.Exit(130) from None  # the shell's code for a Ctrl-C'd command
    except (ValueError, FileNotFoundError, FileExistsError) as err:  # names the file or option
        fail(str(err))
    typer.echo(
        f"Held-out perplexity: {result.ppl_before:.2f} before, {result.ppl_after:.2f} after "
        f"({result.change:+.1%}), {result.steps} updates, {format_duration(result.seconds)}"
    )
    if result.ppl_after >= result.ppl_before:
        typer.echo(
            "The adaptation did not lower the held-out perplexity: the source biLM is as good on "
            "this text; more text of the domain, or a lower --learning-rate, may help"
            + (" (the output holds the source biLM, unchanged)" if result.kept_source else "")
        )
    typer.echo(
        f"Adapted biLM in {output_dir}. Next, a component on it:\n"
        f"  python -m spacy_elmo config train.cfg --pipeline COMPONENTS --train TRAIN --dev DEV --weights {output_dir}\n"
        "  python -m spacy train train.cfg --output my_model"
    )
