"""The weight options every command takes (``--weights``, or ``--options-file`` + ``--weight-file``,
or neither: the bundled model), resolved by ``spacy_elmo.sources.resolve_weight_source`` as
everywhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional

import typer

if TYPE_CHECKING:
    from spacy.language import Language

from ..nn.precision import PRECISIONS, get_precision
from ..sources import WeightSource, resolve_weight_source, weight_keys
from .errors import fail, failing

WEIGHTS = typer.Option(
    None,
    "--weights",
    help="A released or downloaded model's name (python -m spacy_elmo list) or a model directory "
    "(default: the bundled English model)",
)
OPTIONS_FILE = typer.Option(None, "--options-file", help="A model's options.json (with --weight-file)")
WEIGHT_FILE = typer.Option(
    None, "--weight-file", help="A model's weight file, e.g. a released weights.hdf5 (with --options-file)"
)


def checked_precision(name: str) -> str:
    """A precision's name as typer checks an option: BadParameter naming the modes."""
    try:
        get_precision(name, "--precision")
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    return name


PRECISION = typer.Option(
    "fp32",
    "--precision",
    callback=checked_precision,
    help=f"Numeric precision of the biLM: {', '.join(PRECISIONS)}; int8 is the fastest on a CPU, "
    "not exact (docs/guide/speed.md)",
)


def weight_settings(
    weights: Optional[str], options_file: Optional[Path], weight_file: Optional[Path]
) -> Dict[str, Optional[str]]:
    """The weight keys of the ``elmo`` pipe's model block, checked now (with ``fail``)."""
    weight_source(weights, options_file, weight_file)
    return weight_keys(weights, options_file, weight_file)


def weight_source(
    weights: Optional[str], options_file: Optional[Path], weight_file: Optional[Path]
) -> WeightSource:
    """The files the options name, or exit with an error line."""
    with failing(ValueError, FileNotFoundError):
        return resolve_weight_source(weights, options_file, weight_file, what="--weights")

THREADS_HELP = "Threads the biLM splits its batches over, PyTorch ops on one thread each (more help only on cores no other process uses)"


def elmo_pipeline(model_settings: Dict[str, object], lang: str, prefix: str = "", **pipe_settings) -> "Language":
    """A blank pipeline of ``lang`` with the elmo pipe, its weights read now; ``model_settings`` and
    ``pipe_settings``: keys of the model block and of the pipe; ``prefix`` starts error messages. A
    command owns its process: PyTorch runs one op thread, set here, and the biLM splits batches over
    ``threads``."""
    import spacy
    import torch

    from .. import pipe  # noqa: F401  registers the factory where no entry point does (a checkout)

    torch.set_num_threads(1)
    nlp = spacy.blank(lang)
    config = {"model": model_settings, **pipe_settings}
    try:
        nlp.add_pipe("elmo", config=config).initialize()  # reads the weights now
    except (ValueError, OSError) as err:  # a bad setting or file, no model to load
        fail(f"{prefix}{err}")
    return nlp
