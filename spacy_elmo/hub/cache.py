"""Where downloaded models live, and finding them again without touching the network.

Layout: ``<cache root>/<name>/`` holds ``options.json``, ``weights.hdf5`` and ``manifest.json``
(srsly JSON: the URL, size and sha256 of each file, and whether the download completed). The
download writes the manifest last, so a model counts as cached only when its manifest says
``complete`` and both files have the recorded sizes; an interrupted download is never mistaken
for a usable model.

The cache root is ``$SPACY_ELMO_HOME`` if set, else ``platformdirs.user_cache_dir("spacy_elmo")``
(``~/.cache/spacy_elmo``, or under ``$XDG_CACHE_HOME``, on Linux; ``~/Library/Caches/spacy_elmo``
on macOS; ``%LOCALAPPDATA%/spacy_elmo/Cache`` on Windows).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

import srsly
from platformdirs import user_cache_dir

from ..formats.base import OPTIONS_NAME
from ..formats.bilm_tf import HDF5_NAME
from .catalog import get_release, releases

HOME_VARIABLE = "SPACY_ELMO_HOME"
MANIFEST_NAME = "manifest.json"
APP_NAME = "spacy_elmo"
#: Model names become folder names: keep them to one safe path component.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ModelNotCachedError(FileNotFoundError):
    """A model asked for by name that has not been downloaded (completely) into the cache."""


def cache_root() -> Path:
    """The folder that holds one subfolder per downloaded model (not created here)."""
    configured = os.environ.get(HOME_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    return Path(user_cache_dir(APP_NAME, appauthor=False))


def check_name(name: str) -> str:
    """``name`` if it can be a cache folder name, else a ValueError saying what is allowed."""
    if not _NAME.match(name):
        raise ValueError(
            f"model name {name!r}: use letters, digits, '.', '_' and '-' only (it names a folder)"
        )
    return name


def model_path(name: str) -> Path:
    """Where model ``name`` is (or would be) stored; checks nothing on disk.

    A released model's AllenNLP name finds the same folder as its short name.
    """
    release = get_release(name)
    return cache_root() / (release.name if release is not None else check_name(name))


def read_manifest(directory: Path) -> Optional[Dict[str, Any]]:
    """The manifest of a model folder, or None when there is none."""
    path = directory / MANIFEST_NAME
    return srsly.read_json(path) if path.is_file() else None


@dataclass(frozen=True)
class CachedModel:
    """A model folder in the cache, as ``list`` shows it."""

    name: str
    path: Path
    complete: bool
    size_bytes: int
    shape: str
    problem: Optional[str]


def list_cached() -> List[CachedModel]:
    """Every model folder in the cache, complete or not, sorted by name."""
    root = cache_root()
    if not root.is_dir():
        return []
    return [_describe(d) for d in sorted(root.iterdir()) if d.is_dir() and _NAME.match(d.name)]


def _describe(directory: Path) -> CachedModel:
    manifest = read_manifest(directory) or {}
    problem = unusable_reason(directory, manifest)
    size = sum(f.stat().st_size for f in directory.iterdir() if f.is_file())
    return CachedModel(
        name=directory.name,
        path=directory,
        complete=problem is None,
        size_bytes=size,
        shape=manifest.get("shape", "?"),
        problem=problem,
    )


def unusable_reason(directory: Path, manifest: Dict[str, Any]) -> Optional[str]:
    """Why ``directory`` is not a usable model, or None when it is."""
    if not manifest:
        return f"no {MANIFEST_NAME}"
    if not manifest.get("complete"):
        return "download not completed"
    for file_name in (OPTIONS_NAME, HDF5_NAME):
        record = manifest.get("files", {}).get(file_name)
        path = directory / file_name
        if record is None or not path.is_file():
            return f"{file_name} missing"
        if path.stat().st_size != record["size"]:
            return f"{file_name} has {path.stat().st_size} bytes, the manifest recorded {record['size']}"
    return None


def model_dir(name: str) -> Path:
    """The folder of the downloaded model ``name`` (options.json + weights.hdf5).

    Never downloads: a model that is missing or incomplete raises ``ModelNotCachedError`` whose
    message gives the exact command that downloads it.
    """
    directory = model_path(name)
    manifest = read_manifest(directory) or {}
    problem = unusable_reason(directory, manifest) if directory.is_dir() else "not downloaded"
    if problem is None:
        return directory
    raise ModelNotCachedError(
        f"ELMo model '{name}' is not in the cache {cache_root()} ({problem}). "
        f"Download it once with:\n    {download_command(name, manifest)}"
    )


def download_command(name: str, manifest: Optional[Dict[str, Any]] = None, force: bool = False) -> str:
    """The ``python -m spacy_elmo download`` command that fetches model ``name`` (with ``force``:
    again, over a copy in the cache that is complete in size but damaged)."""
    again = " --force" if force else ""
    if get_release(name) is not None:
        return f"python -m spacy_elmo download {name}{again}"
    urls = (manifest or {}).get("urls", {})
    options_url = urls.get(OPTIONS_NAME, "OPTIONS_URL")
    weights_url = urls.get(HDF5_NAME, "WEIGHTS_URL")
    hint = "" if urls else f"  (released names: {', '.join(releases())})"
    return (
        f"python -m spacy_elmo download --options-url {options_url} "
        f"--weight-url {weights_url} --name {name}{again}{hint}"
    )
