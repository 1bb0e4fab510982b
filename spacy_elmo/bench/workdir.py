"""Where a bench keeps its files: the folder the user named (kept), or a temporary one."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Iterator, Optional


@contextlib.contextmanager
def bench_workdir(path: Optional[Path], prefix: str = "spacy-elmo-bench-") -> Iterator[Path]:
    """``path`` (created if needed, left in place: ``--workdir`` caches models between runs), or
    a temporary folder removed afterwards."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)
