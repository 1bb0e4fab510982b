"""PyTorch's intra-op thread count for one block of work, restored after it.

PyTorch starts as many OpenMP threads as the machine has cores. When other processes keep those
cores busy, its threads wait for each other at every parallel op: on a 2-core machine shared
with one other job, ``en_core_web_sm`` + elmo ran 25x slower with 2 threads than with 1. The pipe,
``embed``, ``demo`` and pretraining take a ``threads`` setting and enter this context, so the
caller's own torch setting is what it was after the call.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Optional

import torch

_forked = False


def _one_thread_after_fork() -> None:
    """In a child forked from this process, before anything else runs there: one PyTorch
    thread. GNU OpenMP's thread pool does not survive ``fork``: a child whose parent ever ran a
    parallel torch op (a matmul of the user's, a pipeline's weight load) hangs for good in its
    first parallel op unless it runs single-threaded. Setting it here, rather than when the pipe
    first runs, covers the child's every op, the lazy weight load included."""
    global _forked
    _forked = True
    torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_one_thread_after_fork)


def check_threads(value: Optional[int], what: str) -> Optional[int]:
    """``value`` if it is None or a positive int, else a ValueError naming ``what`` (the key)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{what} must be a positive integer or null (PyTorch's own setting), got {value!r}")
    return value


def threads_in_this_process(threads: Optional[int]) -> Optional[int]:
    """``threads``, or 1 in a process forked from one that had imported this package
    (``nlp.pipe(n_process=2)`` with ``fork``, a web server forking its workers): its OpenMP pool
    is broken (see ``_one_thread_after_fork``), and workers should not compete for cores anyway.
    Spawned and forkserver workers start a fresh pool and run ``threads``."""
    return 1 if _forked else threads


@contextlib.contextmanager
def torch_threads(n_threads: Optional[int]) -> Iterator[int]:
    """Run the block with ``n_threads`` PyTorch threads (None: leave the setting alone) and
    restore ``torch.get_num_threads()`` after; yields the count in force."""
    before = torch.get_num_threads()
    if n_threads is None or n_threads == before:
        yield before
        return
    torch.set_num_threads(n_threads)
    try:
        yield n_threads
    finally:
        torch.set_num_threads(before)
