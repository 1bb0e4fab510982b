"""Where a bench keeps its files: the folder the user named (kept), or a temporary one.

A temporary folder (``benchmarks inference`` writes its random-weight models there, ~360 MB for the
original shape) is removed when the bench ends, fails, is interrupted (Ctrl-C) or gets SIGTERM.
SIGKILL cannot be caught: the folder's name holds the bench's process id
(``spacy-elmo-bench-<pid>-...``), and the next bench removes the folders of processes that are
gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Iterator, Optional

#: The exit status of a bench stopped by SIGTERM (128 + 15, as the shell reports it).
SIGTERM_STATUS = 128 + signal.SIGTERM


@contextlib.contextmanager
def bench_workdir(path: Optional[Path], prefix: str = "spacy-elmo-bench-") -> Iterator[Path]:
    """``path`` (created if needed, left in place: ``--workdir`` caches models between runs), or
    a temporary folder removed afterwards, SIGTERM included."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    sweep_stale_workdirs(Path(tempfile.gettempdir()), prefix)
    with _exit_on_sigterm(), tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-") as tmp:
        yield Path(tmp)


def sweep_stale_workdirs(root: Path, prefix: str) -> None:
    """Remove this user's ``<prefix><pid>-*`` folders in ``root`` whose process is gone (a
    SIGKILLed bench). A folder whose process id is in use again is left alone."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    for folder in root.glob(f"{prefix}*"):
        match = pattern.match(folder.name)
        if match is None or not folder.is_dir() or folder.is_symlink():
            continue
        try:
            if folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not _process_exists(int(match[1])):
            shutil.rmtree(folder, ignore_errors=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


@contextlib.contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """While inside: SIGTERM raises SystemExit, so the ``with`` blocks around it clean up (by
    default SIGTERM ends the process at once). Only where Python can set handlers (the main
    thread) and nobody else has set one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return

    def stop(signum, frame):
        raise SystemExit(SIGTERM_STATUS)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
