"""Named biLM shapes and random-weight models of them, written once to a cache directory.

Speed and memory depend on the shape, not on the weights, so benchmarks run on random weights of
the released shapes (the released files are not needed, nor downloadable here):

- ``original``: the released "original" model (93.6M parameters, a 374 MB weight file);
- ``small``: the released "small" model (13.6M parameters);
- ``bundled``: the shape of the bundled English model (its own ``options.json``, from the package);
- ``fixture``: the tiny model of the AllenNLP test fixture (for tests and quick checks).

The bundled model's recipe, what ``benchmarks pretrain --case bundled`` trains, ships beside it
in the package (``BUNDLED_RECIPE_NAME``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import srsly
import torch

from spacy_elmo.chars import N_CHARACTERS
from spacy_elmo.formats.base import WeightSource
from spacy_elmo.formats.native import save_bilm
from spacy_elmo.nn.bilm import BiLM
from spacy_elmo.options import BiLMOptions
from spacy_elmo.sources import resolve_weight_source

from .subprocesses import CHECKOUT

#: The tiny model of AllenNLP's test fixture, in the checkout's tests.
FIXTURE_OPTIONS = CHECKOUT / "tests" / "fixtures" / "allennlp_elmo" / "options.json"
RELEASED_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
#: The pretraining config the bundled model was trained with, in its directory (package data; a
#: copy of the project's configs/pretrain_wikitext2.cfg, which tests keep the same).
BUNDLED_RECIPE_NAME = "config.cfg"


def _released(dim: int, projection_dim: int, n_highway: int) -> Dict[str, Any]:
    return {
        "char_cnn": {
            "activation": "relu",
            "embedding": {"dim": 16},
            "filters": RELEASED_FILTERS,
            "max_characters_per_token": 50,
            "n_characters": N_CHARACTERS,
            "n_highway": n_highway,
        },
        "lstm": {
            "cell_clip": 3,
            "dim": dim,
            "n_layers": 2,
            "proj_clip": 3,
            "projection_dim": projection_dim,
            "use_skip_connections": True,
        },
    }


FIXED_SHAPES: Dict[str, Dict[str, Any]] = {
    "original": _released(4096, 512, 2),
    "small": _released(1024, 128, 1),
    "fixture": srsly.read_json(FIXTURE_OPTIONS),
}
SHAPE_NAMES = ("original", "small", "bundled", "fixture")


def bundled_model() -> WeightSource:
    """The bundled model's files: what the one resolver gives for no weights."""
    return resolve_weight_source(what="the bundled shape")


def bundled_recipe_path() -> Path:
    """The bundled model's pretraining config, shipped in its directory."""
    path = bundled_model().directory / BUNDLED_RECIPE_NAME
    if not path.is_file():
        raise FileNotFoundError(f"the bundled model's recipe {path} is not in this installation")
    return path


def bundled_options() -> BiLMOptions:
    """The bundled model's shape: its own ``options.json``."""
    return BiLMOptions.from_file(bundled_model().options_file)


def shape_source(name: str) -> str:
    """Where shape ``name`` comes from: the bundled model's options file, or a fixed shape."""
    if name == "bundled":
        return str(bundled_model().options_file)
    return f"{name} shape (fixed in {__name__})"


def shape_options(name: str) -> BiLMOptions:
    if name == "bundled":
        return bundled_options()
    if name not in FIXED_SHAPES:
        raise ValueError(f"unknown biLM shape {name!r}; choose one of {', '.join(SHAPE_NAMES)}")
    return BiLMOptions.from_dict(FIXED_SHAPES[name], source=f"shape {name!r}")


def random_bilm(options: BiLMOptions, seed: int = 0) -> BiLM:
    """A biLM with bilm-tf's initialisation (realistic magnitudes: forget bias 1, highway
    carry gates mostly closed), the same for the same seed."""
    from spacy_elmo.pretrain.model import init_bilm_tf_style

    torch.manual_seed(seed)
    bilm = BiLM(options)
    init_bilm_tf_style(bilm)
    return bilm.eval()


def cached_model(workdir: Path, shape: str, seed: int = 0, progress: bool = True) -> Path:
    """A directory holding ``options.json`` + ``model.safetensors`` of ``random_bilm(shape,
    seed)``, written only when missing.

    ``complete.json`` is written last, so a directory left by an interrupted run is rebuilt.
    """
    options = shape_options(shape)
    directory = Path(workdir) / f"{shape}-seed{seed}"
    marker = directory / "complete.json"
    wanted = {"options": options.to_dict(), "seed": seed}
    if marker.is_file() and json.loads(marker.read_text()) == wanted:
        return directory
    if progress:
        print(f"writing random {shape} biLM (seed {seed}) to {directory} ...", flush=True)
    bilm = random_bilm(options, seed)
    if marker.exists():
        marker.unlink()
    save_bilm(bilm, directory)
    marker.write_text(json.dumps(wanted))
    return directory
