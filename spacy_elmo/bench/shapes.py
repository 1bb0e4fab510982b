"""Named biLM shapes and random-weight models of them, written once to a cache directory.

Speed and memory depend on the shape, not on the weights, so benchmarks run on random weights of
the released shapes (the released files are not needed, nor downloadable here):

- ``original``: the released "original" model (93.6M parameters, a 374 MB weight file);
- ``small``: the released "small" model (13.6M parameters);
- ``bundled``: the shape of the bundled English model (the pretraining config's ``[model]``);
- ``fixture``: the tiny model of the AllenNLP test fixture (for tests and quick checks).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from ..chars import N_CHARACTERS
from ..nn.bilm import BiLM
from ..options import BiLMOptions
from ..weights import HDF5_NAME, OPTIONS_NAME, SAFETENSORS_NAME, save_bilm, write_bilm_tf_weights

RELEASED_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The config the bundled model is trained with (present in a source checkout, not when installed).
BUNDLED_CONFIG = REPO_ROOT / "project" / "configs" / "pretrain_wikitext2.cfg"


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
    "fixture": {  # tests/fixtures/allennlp_elmo/options.json
        "char_cnn": {
            "activation": "relu",
            "embedding": {"dim": 4},
            "filters": [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]],
            "max_characters_per_token": 50,
            "n_characters": N_CHARACTERS,
            "n_highway": 2,
        },
        "lstm": {
            "cell_clip": 3,
            "dim": 64,
            "n_layers": 2,
            "proj_clip": 3,
            "projection_dim": 16,
            "use_skip_connections": True,
        },
    },
}
SHAPE_NAMES = ("original", "small", "bundled", "fixture")


def bundled_config_path() -> Optional[Path]:
    """The bundled model's pretraining config, or None outside a source checkout."""
    return BUNDLED_CONFIG if BUNDLED_CONFIG.is_file() else None


def bundled_options() -> BiLMOptions:
    """The ``[model]`` of the bundled model's config (the package default config, which has the
    same ``[model]``, outside a source checkout)."""
    from confection import Config

    from ..pretrain.config import default_config

    path = bundled_config_path()
    config = Config().from_disk(path, interpolate=False) if path else default_config()
    model = config["model"]
    return BiLMOptions.from_dict(
        {
            "char_cnn": {
                "activation": model["activation"],
                "embedding": {"dim": model["char_embedding_dim"]},
                "filters": model["filters"],
                "n_highway": model["n_highway"],
            },
            "lstm": {
                "dim": model["lstm_dim"],
                "projection_dim": model["projection_dim"],
                "n_layers": model["n_layers"],
                "cell_clip": model["cell_clip"],
                "proj_clip": model["proj_clip"],
                "use_skip_connections": model["use_skip_connections"],
            },
        },
        source=str(path or "the default pretraining config"),
    )


def shape_options(name: str) -> BiLMOptions:
    if name == "bundled":
        return bundled_options()
    if name not in FIXED_SHAPES:
        raise ValueError(f"unknown biLM shape {name!r}; choose one of {', '.join(SHAPE_NAMES)}")
    return BiLMOptions.from_dict(FIXED_SHAPES[name], source=f"shape {name!r}")


def random_bilm(options: BiLMOptions, seed: int = 0) -> BiLM:
    """A biLM with bilm-tf's initialisation (realistic magnitudes: forget bias 1, highway
    carry gates mostly closed), the same for the same seed."""
    from ..pretrain.model import init_bilm_tf_style

    torch.manual_seed(seed)
    bilm = BiLM(options)
    init_bilm_tf_style(bilm)
    return bilm.eval()


def cached_model(
    workdir: Path, shape: str, seed: int = 0, bilm_tf: bool = False, progress: bool = True
) -> Path:
    """A directory holding ``options.json`` + ``model.safetensors`` (and ``weights.hdf5`` in the
    bilm-tf layout with ``bilm_tf``) of ``random_bilm(shape, seed)``, written only when missing.

    ``complete.json`` is written last, so a directory left by an interrupted run is rebuilt.
    """
    options = shape_options(shape)
    directory = Path(workdir) / f"{shape}-seed{seed}"
    marker = directory / "complete.json"
    wanted = {"options": options.to_dict(), "seed": seed}
    done: Dict[str, Any] = json.loads(marker.read_text()) if marker.is_file() else {}
    have_native = done.get("options") == wanted["options"] and done.get("seed") == seed
    have_hdf5 = have_native and done.get("bilm_tf", False)
    if have_native and (have_hdf5 or not bilm_tf):
        return directory
    if progress:
        print(f"writing random {shape} biLM (seed {seed}) to {directory} ...", flush=True)
    bilm = random_bilm(options, seed)
    if marker.exists():
        marker.unlink()
    save_bilm(bilm, directory)
    if bilm_tf:
        write_bilm_tf_weights(bilm, directory / HDF5_NAME)
    marker.write_text(json.dumps({**wanted, "bilm_tf": bilm_tf}))
    return directory


def model_files(directory: Path) -> Dict[str, Path]:
    return {
        "options": directory / OPTIONS_NAME,
        "safetensors": directory / SAFETENSORS_NAME,
        "hdf5": directory / HDF5_NAME,
    }
