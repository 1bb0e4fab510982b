"""Which weights a reference means: the one resolver. ``weights`` (a directory, or a model's name; a
path wins, a name never downloads), ``options_file`` + ``weight_file``, or nothing (the bundled
model). ``resolve_weight_source`` checks files cheaply and names the setting in its errors, so
callers resolve early and load late. docs/guide/released-models.md, docs/reference/errors.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import torch

from .formats import (
    OPTIONS_NAME,
    OptionsMismatchError,
    WeightFileError,
    WeightSource,
    check_weight_files,
    locate_model_dir,
    read_bilm,
    weight_file_source,
)
from .formats.base import PathLike
from .hub.cache import ModelNotCachedError, download_command, model_dir, read_manifest
from .hub.catalog import get_release, releases
from .nn.bilm import BiLM
from .options import OptionsError

#: The small English model bundled with the package: the weights when none are named.
DEFAULT_MODEL = Path(__file__).parent / "models" / "en_wikitext_small"


def resolve_weight_source(
    weights: Optional[PathLike] = None,
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    *,
    what: str = "weights",
) -> WeightSource:
    """The files of the biLM that the three settings refer to; ``what`` names the setting in errors.

    Raises FileNotFoundError for missing files (``ModelNotCachedError``, giving the download
    command, for a model name not in the cache) and ValueError for settings that do not go together.
    """
    check_weight_settings(weights, options_file, weight_file, what=what)
    if options_file is not None:
        options_path = Path(options_file)
        if options_path.is_dir():
            options_path = options_path / OPTIONS_NAME
        return _checked(weight_file_source(options_path, Path(weight_file)), _your_files)
    if weights is None:
        return _bundled_model(what)
    path = Path(weights)
    if path.is_dir():
        return _checked(locate_model_dir(path, what), _your_files)
    if path.exists():
        raise ValueError(f"{what} {path}: give a model directory, or an options file and a weight file")
    if str(weights) == DEFAULT_MODEL.name:
        return _bundled_model(what)
    if len(path.parts) == 1 and not path.suffix:
        return _cached_model(str(weights), what)
    raise FileNotFoundError(f"{what} {path} does not exist")


def _checked(source: WeightSource, next_step: Callable[[WeightSource], str]) -> WeightSource:
    """``source`` once its files pass their format's cheap check; else that error with
    ``next_step(source)``, how to get whole, matching files."""
    try:
        check_weight_files(source)
    except (OptionsMismatchError, OptionsError) as err:
        raise type(err)(
            f"{err}. Use the options.json written with these weights (a released model's comes with "
            "it: python -m spacy_elmo download NAME)"
        ) from None
    except WeightFileError as err:
        raise type(err)(f"{err}. {next_step(source)}") from None
    return source


def _your_files(source: WeightSource) -> str:
    """The next step for files the user named: where such files come from."""
    if source.format == "native":
        origin = (
            "A native checkpoint is written by python -m spacy_elmo pretrain or convert: copy it "
            "again from where it was made, or make it again"
        )
    else:
        origin = (
            "Copy the files again from where they came from; a released model is best fetched into "
            f"the cache, which checks every byte: python -m spacy_elmo download NAME (names: "
            f"{', '.join(releases())}), then weights = NAME"
        )
    return f"{origin}."


def check_weight_settings(
    weights: Optional[PathLike],
    options_file: Optional[PathLike],
    weight_file: Optional[PathLike],
    *,
    what: str = "weights",
) -> None:
    """Refuse settings that do not go together, before any file is looked at."""
    if weights is not None and (options_file is not None or weight_file is not None):
        raise ValueError(f"set {what}, or options_file and weight_file, not both")
    if (options_file is None) != (weight_file is None):
        missing = "weight_file" if weight_file is None else "options_file"
        raise ValueError(f"options_file and weight_file go together; {missing} is missing")


def weight_keys(
    weights: Optional[PathLike], options_file: Optional[PathLike], weight_file: Optional[PathLike]
) -> Dict[str, Optional[str]]:
    """The three weight settings as the model block holds them (all None: bundled), unchecked."""
    names = {"weights": weights, "options_file": options_file, "weight_file": weight_file}
    return {key: None if value is None else str(value) for key, value in names.items()}


def _cached_model(name: str, what: str) -> WeightSource:
    """A model downloaded into the cache under ``name`` (``spacy_elmo.hub``)."""
    try:
        directory = model_dir(name)
    except (ModelNotCachedError, ValueError) as err:
        if get_release(name) is not None:
            raise type(err)(f"{what} {name!r}: {err}") from None
        raise type(err)(
            f"{what} {name!r} is neither a model directory nor a downloaded model: {err}"
        ) from None
    return _checked(
        locate_model_dir(directory, f"{what} {name!r}:"),
        lambda _: f"The downloaded model '{name}' is damaged: download it again with "
        f"{download_command(name, read_manifest(directory), force=True)}",
    )


def _bundled_model(what: str) -> WeightSource:
    if not DEFAULT_MODEL.is_dir():
        raise FileNotFoundError(
            f"no weights given ({what}), and the bundled default model {DEFAULT_MODEL} is not in "
            "this installation; name a model directory, a downloaded model "
            "(python -m spacy_elmo download small), or an options file and a weight file"
        )
    return _checked(
        locate_model_dir(DEFAULT_MODEL, "the bundled model"),
        lambda _: "The model bundled with spacy-elmo is damaged: reinstall the package "
        "(pip install --force-reinstall --no-deps spacy-elmo; in a checkout: pip install -e .)",
    )


#: The biLM held by a resolved ``WeightSource``, in eval mode (its format's reader).
load_bilm_from = read_bilm


def load_bilm(
    weights: PathLike,
    weight_file: Optional[PathLike] = None,
    stateful: bool = False,
    device: Union[str, torch.device, None] = None,
) -> BiLM:
    """Load a biLM (eval mode): two files, a model directory of any format, or a model's name."""
    if weight_file is None:
        source = resolve_weight_source(weights, what="model")
    else:
        source = resolve_weight_source(options_file=weights, weight_file=weight_file)
    return load_bilm_from(source, stateful=stateful, device=device)


__all__: List[str] = [
    "DEFAULT_MODEL",
    "WeightSource",
    "check_weight_settings",
    "load_bilm",
    "load_bilm_from",
    "resolve_weight_source",
    "weight_keys",
]
