"""Run a measurement in a fresh Python process.

Memory freed by one path stays with the allocator (glibc, PyTorch's caching allocator), so
paths measured one after another in one process would see each other's leftovers: a later path
would look cheaper. A fresh process per path (``spawn``, never ``fork``: a forked PyTorch keeps
its parent's thread pools and memory) gives every path the same clean start.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Dict, Iterator, Optional, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def _environment(env: Optional[Dict[str, str]]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_isolated(
    function: Callable[..., T],
    *args: Any,
    isolate: bool = True,
    env: Optional[Dict[str, str]] = None,
    **kwargs: Any,
) -> T:
    """``function(*args, **kwargs)`` in a new process (a top-level, picklable function) whose
    environment has ``env`` added, or in this one with ``isolate=False`` (tests: faster, but
    memory figures are less reliable, and ``env`` is not applied)."""
    if not isolate:
        return function(*args, **kwargs)
    context = multiprocessing.get_context("spawn")
    with _environment(env), ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(function, *args, **kwargs).result()
