"""Weight formats: one reader (and writer) module per format, registered here and nowhere else.

Each module defines a ``FORMAT`` (``base.WeightFormat``); ``FORMATS`` is the order a model directory
is tried in. A new format is one module and one entry here; the core (``options.py``, ``nn/``) knows
none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple, Union

import torch

from ..nn.bilm import BiLM
from . import bilm_tf, manylangs, native
from .base import (
    OPTIONS_NAME,
    VOCAB_NAME,
    LoadedWeights,
    OptionsMismatchError,
    WeightFileError,
    WeightFormat,
    WeightSource,
    build_bilm,
    loaded_bilm,
)

#: Tried in this order on a model directory: an ELMoForManyLangs directory has no options.json,
#: and a directory with both a native checkpoint and an HDF5 file is read as the native one.
FORMATS: Tuple[WeightFormat, ...] = (manylangs.FORMAT, native.FORMAT, bilm_tf.FORMAT)
_BY_NAME: Dict[str, WeightFormat] = {f.name: f for f in FORMATS}


def locate_model_dir(directory: Path, what: str) -> WeightSource:
    """The files of the model directory ``directory`` (``what`` names the setting in errors)."""
    for weight_format in FORMATS:
        try:
            found = weight_format.locate(directory)
        except ValueError as err:
            raise type(err)(f"{what} {err}") from None
        if found is not None:
            return found
    raise FileNotFoundError(
        f"{what} {directory}: no {native.SAFETENSORS_NAME} or {bilm_tf.HDF5_NAME} (nor another "
        "bilm-tf *.hdf5 weight file) in the model directory"
    )


def weight_file_source(options_file: Path, weight_file: Path) -> WeightSource:
    """An options file and a weight file named alone (the format from the file's contents)."""
    if not options_file.is_file():
        raise FileNotFoundError(f"ELMo options file not found: {options_file}")
    if not weight_file.is_file():
        raise FileNotFoundError(f"ELMo weight file not found: {weight_file}")
    for weight_format in FORMATS:
        if weight_format.accepts(weight_file):
            return WeightSource(options_file, weight_file, weight_format.name)
    raise WeightFileError(f"{weight_file}: not a weight file of any known format")


def check_weight_files(source: WeightSource) -> None:
    """The cheap checks of ``source``'s files (``WeightFormat.check``), reading no weights."""
    _BY_NAME[source.format].check(source)


def read_bilm(
    source: WeightSource, stateful: bool = False, device: Union[str, torch.device, None] = None
) -> BiLM:
    """The biLM held by ``source`` (its format's reader, then ``build_bilm``), in eval mode."""
    return loaded_bilm(_BY_NAME[source.format].read(source), str(source.weight_file), stateful, device)


__all__ = [
    "FORMATS",
    "OPTIONS_NAME",
    "VOCAB_NAME",
    "LoadedWeights",
    "OptionsMismatchError",
    "WeightFileError",
    "WeightFormat",
    "WeightSource",
    "build_bilm",
    "check_weight_files",
    "locate_model_dir",
    "read_bilm",
    "weight_file_source",
]
