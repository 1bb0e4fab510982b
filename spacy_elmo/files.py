"""Files that exist only whole: written under a temporary name of the writer's own, then renamed."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Union

import srsly


@contextmanager
def replacing(path: Union[str, Path], suffix: Optional[str] = None, fsync: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to: renamed over ``path`` when the block ends
    without an error, removed when it fails or is stopped. Its name ends in ``suffix``, by default
    this process's and thread's, so two writers never move each other's file. ``fsync``: the
    content is on disk before the rename (a file others resume from)."""
    path = Path(path)
    temporary = path.with_name(path.name + (suffix or f".{os.getpid()}-{threading.get_ident()}.tmp"))
    try:
        yield temporary
        if fsync:
            descriptor = os.open(temporary, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_json_atomically(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, whole or not at all."""
    with replacing(path) as temporary:
        srsly.write_json(temporary, data)
