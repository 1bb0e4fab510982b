"""The parts folder and its chunk files: the unit of work, of resumption and of progress. Chunk
``c`` is rank ``c % world_size``'s, written under a temporary name and renamed when whole, so a
chunk file that exists is complete. Datasets are named by position; the merge names them.
"""

from __future__ import annotations

import os
import re
import socket
from contextlib import ExitStack
from pathlib import Path
from typing import Any, List, Optional, Set, Tuple

import h5py
import numpy as np

from ..files import replacing

PARTS_SUFFIX = ".parts"
CHUNK_PATTERN = re.compile(r"^chunk-(\d+)\.hdf5$")
TEMPORARY_SUFFIX = ".tmp"
KEYS = "keys"


def parts_folder(output: Path) -> Path:
    return output.with_name(output.name + PARTS_SUFFIX)


def chunk_path(parts: Path, chunk: int) -> Path:
    return parts / f"chunk-{chunk:07d}.hdf5"


def finished_chunks(parts: Path) -> Set[int]:
    """The numbers of the chunk files in ``parts`` (complete by construction)."""
    found = set()
    try:
        names = os.listdir(parts)
    except FileNotFoundError:
        return found
    for name in names:
        match = CHUNK_PATTERN.match(name)
        if match:
            found.add(int(match.group(1)))
    return found


def remove_temporaries(parts: Path, own: bool = False) -> None:
    """Delete what killed writers left (chunks and manifests that never got their final name);
    ``own``: this process's only (what a stop left behind)."""
    for path in parts.glob(f"*{own_temporary_suffix() if own else TEMPORARY_SUFFIX}"):
        path.unlink(missing_ok=True)


def own_temporary_suffix() -> str:
    """The end of this process's temporary file names (unique per host and process)."""
    return f".{socket.gethostname()}-{os.getpid()}{TEMPORARY_SUFFIX}"


def chunk_counts(path: Path) -> Tuple[int, int]:
    """(sentences, tokens) of a finished chunk file."""
    with h5py.File(path, "r") as f:
        return int(f.attrs["sentences"]), int(f.attrs["tokens"])


def chunk_keys(chunk: h5py.File) -> List[str]:
    return list(chunk[KEYS].asstr()[()]) if KEYS in chunk else []


class ChunkWriter:
    """One chunk file written a sentence at a time under a temporary name, renamed into place by
    ``finish`` (or by leaving the context normally); leaving it by an error or a signal removes the
    temporary file."""

    def __init__(self, parts: Path, chunk: int, first_item: int, rank: int = 0) -> None:
        self.path = chunk_path(parts, chunk)
        self.chunk = chunk
        self.first_item = first_item
        self.rank = rank  # which process embedded it: the summary counts each rank's sentences
        self.keys: List[str] = []
        self.tokens = 0
        with ExitStack() as stack:  # a file that fails to open leaves no temporary file
            # Unique per process: a writer that outlived its job never shares a file with a new one.
            self.temporary = stack.enter_context(replacing(self.path, own_temporary_suffix(), fsync=True))
            self._file: Optional[h5py.File] = stack.enter_context(h5py.File(self.temporary, "w"))
            self._open = stack.pop_all()  # the file, then its renaming: closed by finish or __exit__

    def add(self, vectors: np.ndarray, key: str, tokens: int) -> None:
        assert self._file is not None
        self._file.create_dataset(str(len(self.keys)), data=np.ascontiguousarray(vectors, dtype=np.float32))
        self.keys.append(key)
        self.tokens += tokens

    def finish(self) -> None:
        """Write the keys and counts, close, fsync and rename: the chunk is complete."""
        assert self._file is not None
        f = self._file
        f.create_dataset(KEYS, data=np.array(self.keys, dtype=object), dtype=h5py.string_dtype())
        f.attrs["chunk"] = self.chunk
        f.attrs["first_item"] = self.first_item
        f.attrs["sentences"] = len(self.keys)
        f.attrs["tokens"] = self.tokens
        f.attrs["rank"] = self.rank
        self._file = None
        self._open.close()  # close the file, fsync it and rename it

    def __enter__(self) -> "ChunkWriter":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if exc_info[0] is None and self._file is not None:
            self.finish()
        # Whatever stopped the writer (an error, a signal, even inside finish), no temporary file
        # stays; a finished chunk's was renamed: nothing to remove.
        self._open.__exit__(*exc_info)
