"""Files that exist only whole: written under a temporary name of the writer's own, then renamed."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import srsly


def write_json_atomically(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path`` through a temporary file beside it whose name is this process's
    and thread's, so that a file that exists is whole and two writers never move each other's
    file (the temporary file ends in ``.tmp``; a crash may leave it, never ``path`` half-written)."""
    path = Path(path)
    temporary = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        srsly.write_json(temporary, data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
