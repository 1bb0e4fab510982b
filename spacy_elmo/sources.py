"""Where a biLM's weights come from: the one place that turns what a user gave into files.

Users name weights in three ways: a model directory (``model_path``, ``load_bilm(dir)``,
``init-config --model``, ``initialize.bilm``), an options file with a weight file
(``options_file`` + ``weight_file``), or nothing (the bundled default model, chosen by the
caller). ``resolve_weight_source`` checks them up front, with errors that name the setting and
the file, and ``load_bilm_from`` reads what it resolved. The ``elmo`` pipe, ``load_bilm``, the
CLI (``convert``, ``init-config``) and the pipe benchmarks all go through here.

Adding a kind of source (a released model by name from a cache, an ELMoForManyLangs directory)
is one branch in ``resolve_weight_source`` (or, for a directory recognised by its files, in
``_resolve_directory``) and, when it brings a new file format, one entry in ``STATE_READERS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import h5py
import torch

from .manylangs.model_dir import CONFIG_NAME as MANYLANGS_CONFIG
from .manylangs.model_dir import ENCODER as MANYLANGS_ENCODER
from .manylangs.model_dir import is_manylangs_dir, load_manylangs_bilm
from .nn.bilm import BiLM
from .options import BiLMOptions
from .weights import (
    HDF5_NAME,
    HDF5_READ_ERRORS,
    OPTIONS_NAME,
    SAFETENSORS_NAME,
    PathLike,
    WeightFileError,
    build_bilm,
    read_bilm_tf_weights,
    read_safetensors,
)


#: The format of a whole ELMoForManyLangs model directory (config, lexicons, torch state dicts).
MANYLANGS = "elmoformanylangs"


@dataclass(frozen=True)
class WeightSource:
    """Resolved, existing files of one biLM.

    format: ``"native"`` (a safetensors state dict, as ``save_bilm`` and ``pretrain`` write)
        or ``"bilm-tf"`` (the released HDF5 layout), keys of ``STATE_READERS``; or
        ``"elmoformanylangs"`` (a whole ELMoForManyLangs directory, read by ``spacy_elmo.manylangs``).
    directory: the model directory, where ``vocab.txt`` and a pretraining run's softmax live.
    """

    options_file: Path
    weight_file: Path
    format: str

    @property
    def directory(self) -> Path:
        return self.weight_file.parent

    def describe(self) -> str:
        return f"{self.weight_file} ({self.format})"


def resolve_weight_source(
    model_path: Optional[PathLike] = None,
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    *,
    what: str = "model_path",
    model_name: Optional[str] = None,
) -> WeightSource:
    """The files of the biLM named by ``model_name`` (a released or downloaded model in the
    cache, ``spacy_elmo.hub``), ``model_path`` (a directory, or an options file) or by
    ``options_file`` + ``weight_file``. ``what`` names the setting in errors (a config key or
    a CLI option).

    A directory holds ``options.json`` and one weight file: ``model.safetensors``, else
    ``weights.hdf5``, else the one bilm-tf ``*.hdf5`` beside it (e.g. ``lm_weights.hdf5``); or
    it is an ELMoForManyLangs model directory. A ``model_name`` never downloads: a model that is
    not in the cache raises an error giving the download command. Raises FileNotFoundError for
    missing files, ValueError for settings that do not go together.
    """
    check_weight_settings(model_path, options_file, weight_file, what=what, model_name=model_name)
    if model_name is not None:
        from .hub import model_dir

        return _resolve_directory(model_dir(model_name), f"model_name {model_name!r}:")
    if model_path is None and options_file is None:
        raise ValueError(
            f"no weights given: set {what}, model_name, or options_file and weight_file"
        )
    if model_path is not None:
        path = Path(model_path)
        if path.is_dir():
            return _resolve_directory(path, what)
        if not path.exists():
            raise FileNotFoundError(f"{what} {path} does not exist")
        raise ValueError(f"{what} {path}: give a model directory, or an options file and a weight file")
    options_path, weight_path = Path(options_file), Path(weight_file)
    if options_path.is_dir():
        options_path = options_path / OPTIONS_NAME
    return _files(options_path, weight_path)


def resolve_model(reference: PathLike, *, what: str = "model") -> WeightSource:
    """A model given by one string, as the CLI and pretraining's ``[initialize] bilm`` take it:
    an existing model directory, or else the name of a downloaded model (``small``,
    ``python -m spacy_elmo list``) when it is a bare name rather than a path."""
    path = Path(reference)
    if not path.exists() and len(path.parts) == 1 and not path.suffix:
        return resolve_weight_source(model_name=str(reference), what=what)
    return resolve_weight_source(path, what=what)


def check_weight_settings(
    model_path: Optional[PathLike],
    options_file: Optional[PathLike],
    weight_file: Optional[PathLike],
    *,
    what: str = "model_path",
    model_name: Optional[str] = None,
) -> None:
    """Refuse settings that do not go together, before any file is looked at (the ``elmo``
    pipe checks at construction and loads the weights later). All None is allowed: the caller
    chooses a default."""
    if model_name is not None and (
        model_path is not None or options_file is not None or weight_file is not None
    ):
        raise ValueError(f"set model_name, or {what}, or options_file and weight_file: one of them")
    if model_path is not None and (options_file is not None or weight_file is not None):
        raise ValueError(f"set {what}, or options_file and weight_file, not both")
    if model_path is None and (options_file is None) != (weight_file is None):
        missing = "weight_file" if weight_file is None else "options_file"
        raise ValueError(f"options_file and weight_file go together; {missing} is missing")


def _resolve_directory(directory: Path, what: str) -> WeightSource:
    """A model directory: options.json and its weight file (see ``resolve_weight_source``).
    The place to recognise another kind of model directory by its files."""
    if is_manylangs_dir(directory):
        # Its loader names each missing or malformed file itself.
        return WeightSource(directory / MANYLANGS_CONFIG, directory / MANYLANGS_ENCODER, MANYLANGS)
    options_path = directory / OPTIONS_NAME
    for name in (SAFETENSORS_NAME, HDF5_NAME):
        if (directory / name).is_file():
            return _files(options_path, directory / name)
    released = [p for p in sorted(directory.glob("*.hdf5")) if _is_bilm_tf_weight_file(p)]
    if len(released) == 1:
        return _files(options_path, released[0])
    if not released:
        raise FileNotFoundError(
            f"{what} {directory}: no {SAFETENSORS_NAME} or {HDF5_NAME} (nor another bilm-tf "
            "*.hdf5 weight file) in the model directory"
        )
    names = ", ".join(p.name for p in released)
    raise ValueError(
        f"{what} {directory}: several bilm-tf weight files ({names}); name one with "
        "options_file and weight_file"
    )


def _files(options_path: Path, weight_path: Path) -> WeightSource:
    if not options_path.is_file():
        raise FileNotFoundError(f"ELMo options file not found: {options_path}")
    if not weight_path.is_file():
        raise FileNotFoundError(f"ELMo weight file not found: {weight_path}")
    fmt = "bilm-tf" if h5py.is_hdf5(str(weight_path)) else "native"
    return WeightSource(options_path, weight_path, fmt)


def _is_bilm_tf_weight_file(path: Path) -> bool:
    """An HDF5 file with bilm-tf's datasets (not, say, cached token embeddings beside it)."""
    if not h5py.is_hdf5(str(path)):
        return False
    try:
        with h5py.File(path, "r") as handle:
            return "char_embed" in handle and "RNN_0" in handle
    except HDF5_READ_ERRORS as err:
        raise WeightFileError(f"{path}: not a readable HDF5 file (truncated or corrupt?): {err}") from err


def load_bilm_from(
    source: WeightSource,
    stateful: bool = False,
    device: Union[str, torch.device, None] = None,
) -> BiLM:
    """The biLM held by ``source``, in eval mode."""
    if source.format == MANYLANGS:
        bilm = load_manylangs_bilm(source.directory, stateful=stateful)
    else:
        options = BiLMOptions.from_file(source.options_file)
        state = STATE_READERS[source.format](options, source.weight_file)
        bilm = build_bilm(options, state, source=str(source.weight_file), stateful=stateful)
    if device is not None:
        bilm.to(device)
    return bilm.eval()


def load_bilm(
    options_file: PathLike,
    weight_file: Optional[PathLike] = None,
    stateful: bool = False,
    device: Union[str, torch.device, None] = None,
) -> BiLM:
    """Load a biLM for inference (eval mode).

    - ``load_bilm("options.json", "weights.hdf5")``: a released ELMo model (bilm-tf layout).
    - ``load_bilm("options.json", "model.safetensors")``: a native state dict.
    - ``load_bilm("model_dir")``: a directory holding ``options.json`` and ``model.safetensors``,
      ``weights.hdf5`` or another bilm-tf ``*.hdf5`` (a native checkpoint, the output of
      ``pretrain``, or a released model), or an ELMoForManyLangs model directory.
    """
    if weight_file is None:
        source = resolve_weight_source(options_file, what="model directory")
    else:
        source = resolve_weight_source(options_file=options_file, weight_file=weight_file)
    return load_bilm_from(source, stateful=stateful, device=device)


#: format -> function(options, weight file) -> BiLM state dict.
STATE_READERS: Dict[str, Callable[[BiLMOptions, Path], Dict[str, torch.Tensor]]] = {
    "bilm-tf": read_bilm_tf_weights,
    "native": lambda options, path: read_safetensors(path),
}

__all__: List[str] = [
    "MANYLANGS",
    "STATE_READERS",
    "WeightSource",
    "load_bilm",
    "load_bilm_from",
    "resolve_model",
    "resolve_weight_source",
]
