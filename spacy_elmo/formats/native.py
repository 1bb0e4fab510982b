"""This package's own checkpoint: ``options.json`` (the released layout plus what the token indexer
needs, ``indexer_to_json``) + ``model.safetensors``. ``save_bilm`` and ``pretrain`` write it;
msgpacked, it is how a spaCy pipeline serialises its biLM (``bilm_to_bytes``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

import h5py
import srsly
import torch
from safetensors import safe_open
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import load_file, save_file
from safetensors.torch import save as save_safetensors_bytes

from ..files import replacing
from ..indexers import indexer_from_json, indexer_to_json
from ..nn.bilm import BiLM
from ..options import BiLMOptions, read_options_json
from .base import (
    OPTIONS_NAME,
    LoadedWeights,
    PathLike,
    WeightFileError,
    WeightFormat,
    WeightSource,
    check_parameter_shapes,
    loaded_bilm,
    parameter_shapes,
)

NAME = "native"
SAFETENSORS_NAME = "model.safetensors"
#: What a serialised pipeline calls the biLM it carries, in errors.
SERIALIZED_SOURCE = "serialized ELMo model"


def options_json(bilm: BiLM) -> Dict[str, Any]:
    """The biLM's ``options.json``: its shape and what its indexer needs."""
    return {**bilm.options.to_dict(), **indexer_to_json(bilm.indexer)}


def save_bilm(bilm: BiLM, directory: PathLike) -> Path:
    """Write a native checkpoint: ``options.json`` + ``model.safetensors``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with replacing(directory / OPTIONS_NAME) as temporary:
        temporary.write_text(json.dumps(options_json(bilm), indent=2) + "\n", encoding="utf-8")
    with replacing(directory / SAFETENSORS_NAME) as temporary:
        save_file(_cpu_state(bilm), str(temporary))
    return directory


def bilm_to_bytes(bilm: Optional[BiLM]) -> bytes:
    """The options and the state dict (safetensors), msgpacked: a pipeline's serialised biLM."""
    if bilm is None:
        return b""
    return srsly.msgpack_dumps({"options": options_json(bilm), "weights": save_safetensors_bytes(_cpu_state(bilm))})


def bilm_from_bytes(data: bytes) -> Optional[BiLM]:
    """Inverse of ``bilm_to_bytes`` (a new BiLM on the CPU, eval mode)."""
    if not data:
        return None
    msg = srsly.msgpack_loads(data)
    loaded = _loaded(msg["options"], load_safetensors_bytes(msg["weights"]), SERIALIZED_SOURCE)
    return loaded_bilm(loaded, SERIALIZED_SOURCE)


def read_safetensors(path: PathLike) -> Dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises its own error types
        raise WeightFileError(
            f"{path}: neither an HDF5 (bilm-tf) nor a safetensors weight file: {err}"
        ) from err


def _locate(directory: Path) -> Optional[WeightSource]:
    weights = directory / SAFETENSORS_NAME
    if not weights.is_file():
        return None
    return WeightSource(directory / OPTIONS_NAME, weights, NAME)


def _accepts(weight_file: Path) -> bool:
    """A weight file given on its own is a safetensors file unless it is HDF5 (bilm-tf's)."""
    return not h5py.is_hdf5(str(weight_file))


def _read(source: WeightSource) -> LoadedWeights:
    data = read_options_json(source.options_file)
    return _loaded(data, read_safetensors(source.weight_file), str(source.options_file))


def _loaded(data: Mapping[str, Any], state: Dict[str, torch.Tensor], source: str) -> LoadedWeights:
    options = BiLMOptions.from_dict(data, source=source)
    return LoadedWeights(options, state, indexer_from_json(data, source))


def _check(source: WeightSource) -> None:
    """The safetensors header (read through the library, which checks that the file holds every
    byte the header describes) and each tensor's shape against the options; no tensor is read."""
    loaded = _loaded(read_options_json(source.options_file), {}, str(source.options_file))
    expected = parameter_shapes(loaded.options, loaded.indexer)
    path = source.weight_file
    try:
        with safe_open(str(path), framework="pt") as handle:
            found = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except Exception as err:  # safetensors raises its own error types
        raise WeightFileError(
            f"{path}: not a complete safetensors weight file ({err}); {_size_against_header(path)}"
        ) from err
    check_parameter_shapes(expected, found, f"{path} (with the options in {source.options_file})")


def _size_against_header(path: Path) -> str:
    """The file's size, and the size its header describes when the header itself is whole
    (8 bytes of header length, the JSON header, then the tensors' bytes)."""
    size = path.stat().st_size
    described = None
    try:
        with path.open("rb") as handle:
            header_length = int.from_bytes(handle.read(8), "little")
            if 8 + header_length <= size:
                header = json.loads(handle.read(header_length))
                ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
                described = 8 + header_length + max(ends, default=0)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    if described is None:
        return f"it holds {size:,} bytes, too few for the header it starts with"
    return f"it holds {size:,} bytes, its header describes {described:,}"


def _cpu_state(bilm: BiLM) -> Dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in bilm.state_dict().items()}


FORMAT = WeightFormat(NAME, _locate, _accepts, _read, _check)
