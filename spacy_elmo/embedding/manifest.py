"""The job manifest: what makes the output, so that ``--resume`` can tell that the chunks on disk
are this job's. ``job.json`` in the parts folder, and an attribute of the finished file.
``compared``: what changes the vectors or the names (the input's and model's sha256, the options
that matter, the chunk size); not the world size, threads or batch size, which may change on
resumption. ``recorded``: paths and versions, for a person, not compared.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Dict, List, Optional

import srsly
from pooch import file_hash

from ..formats import WeightSource

MANIFEST_NAME = "job.json"
#: The attribute of the finished HDF5 file that holds the manifest (JSON).
JOB_ATTR = "spacy_elmo_embed_job"
#: The layout of the parts folder and its chunk files; a change makes old parts unresumable.
PARTS_LAYOUT = 1
#: The manyLangs reader reads its whole directory (lexicons, two state dicts, configs).
WHOLE_DIRECTORY_FORMATS = ("elmoformanylangs",)


def model_files(source: WeightSource) -> List[Path]:
    """The files whose bytes make the model's numbers."""
    if source.format in WHOLE_DIRECTORY_FORMATS:
        return sorted(p for p in source.directory.iterdir() if p.is_file() and not p.name.startswith("."))
    return [source.options_file, source.weight_file]


def model_sha256(source: WeightSource) -> str:
    """One digest over the model's files: their names (not folders) and their digests."""
    digest = hashlib.sha256()
    for path in model_files(source):
        digest.update(f"{path.name}\0{file_hash(str(path))}\n".encode("utf-8"))
    return digest.hexdigest()


def build_manifest(
    input_path: Path, input_kind: str, source: WeightSource, options: Dict[str, Any]
) -> Dict[str, Any]:
    """The manifest of a job: ``options`` are the output-changing settings, by name."""
    from .. import __version__

    compared = {
        "parts_layout": PARTS_LAYOUT,
        "input.format": input_kind,
        "input.size": input_path.stat().st_size,
        "input.sha256": file_hash(str(input_path)),
        "model.format": source.format,
        "model.sha256": model_sha256(source),
        **options,
    }
    recorded = {
        "input.path": str(input_path.resolve()),
        "model.files": [str(p.resolve()) for p in model_files(source)],
        "spacy_elmo": __version__,
    }
    return {"compared": compared, "recorded": recorded}


def differences(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """Each compared key whose value differs, as ``key: was X, now Y`` (digests shortened)."""
    before, after = old.get("compared", {}), new["compared"]
    found = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            found.append(f"{key}: was {_short(before.get(key))}, now {_short(after.get(key))}")
    return found


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "..."
    return repr(value)


def read_manifest(path: Path) -> Optional[Dict[str, Any]]:
    """The manifest at ``path``; None if the file is missing or not a manifest."""
    try:
        manifest = srsly.read_json(path)
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and "compared" in manifest else None

