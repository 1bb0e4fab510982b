"""``python -m spacy_elmo convert``: one weight format to another, checked to give the same vectors."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np
import torch
import typer

from ..formats import OPTIONS_NAME
from ..formats.bilm_tf import HDF5_NAME, export_bilm_tf
from ..formats.native import SAFETENSORS_NAME, save_bilm
from ..indexers import ByteIndexer
from ..sources import load_bilm, load_bilm_from, resolve_weight_source
from .errors import fail, failing

CHECK_SENTENCE = ["Converted", "weights", "must", "give", "the", "same", "vectors", "."]


def convert(
    source: str = typer.Argument(
        ...,
        help="A model directory (options.json + weights.hdf5 or model.safetensors, or an ELMoForManyLangs model), a weight file, or the name of a downloaded model",
    ),
    output_dir: Path = typer.Argument(..., help="Directory to write the converted model to"),
    options_file: Optional[Path] = typer.Option(
        None, "--options-file", help="options.json of a weight file given as SOURCE (default: the one beside it)"
    ),
    to: str = typer.Option("auto", "--to", help="native | bilm-tf | auto (the format SOURCE is not in)"),
) -> None:
    """Convert a released (bilm-tf HDF5) model to a native checkpoint, or back; or an
    ELMoForManyLangs model directory to a native checkpoint. SOURCE may name a downloaded model
    (python -m spacy_elmo list).

    bilm-tf: the released models' format, named after the TensorFlow code that trained them,
    options.json + weights.hdf5 (what AllenNLP reads). Native checkpoint: this package's own
    format, options.json + model.safetensors (what pretrain writes). The converted model is checked
    to give the same vectors.
    """
    if to not in ("auto", "native", "bilm-tf"):
        fail(f"--to must be native, bilm-tf or auto, got {to!r}")
    path = Path(source)
    with failing(ValueError, FileNotFoundError):
        if path.is_file() or options_file is not None:  # a weight file, with its options file
            options = options_file or path.parent / OPTIONS_NAME
            weights = resolve_weight_source(options_file=options, weight_file=path, what="SOURCE")
        else:
            weights = resolve_weight_source(source, what="SOURCE")
        bilm = load_bilm_from(weights)
    weight_path, source_format = weights.weight_file, weights.format
    target = to if to != "auto" else ("native" if source_format != "native" else "bilm-tf")
    if target == "bilm-tf" and not isinstance(bilm.indexer, ByteIndexer):
        fail(f"{source}: an ELMoForManyLangs model converts to a native checkpoint only (--to native)")
    if target == "native":
        save_bilm(bilm, output_dir)
        written = output_dir / SAFETENSORS_NAME
    else:
        export_bilm_tf(bilm, output_dir)
        written = output_dir / HDF5_NAME
    converted = load_bilm(output_dir / OPTIONS_NAME, written)
    difference = float(np.abs(_layers(bilm, CHECK_SENTENCE) - _layers(converted, CHECK_SENTENCE)).max())
    typer.echo(f"{weight_path} ({source_format}) -> {written} ({target})")
    typer.echo(f"largest difference of the biLM layers on a test sentence: {difference:.3g}")
    if difference > 1e-5:
        fail("the converted model does not reproduce the original's vectors")


def _layers(bilm, words: List[str]) -> np.ndarray:
    with torch.no_grad():
        return bilm(torch.from_numpy(bilm.batch_to_ids([words])))[0].numpy()
