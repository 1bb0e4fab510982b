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

_IMPORTING_PID = os.getpid()


def check_threads(value: Optional[int], what: str) -> Optional[int]:
    """``value`` if it is None or a positive int, else a ValueError naming ``what`` (the key)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{what} must be a positive integer or null (PyTorch's own setting), got {value!r}")
    return value


def threads_in_this_process(threads: Optional[int]) -> Optional[int]:
    """``threads``, or 1 in a process forked from the one that imported this module
    (``nlp.pipe(n_process=2)``): the OpenMP thread pool of a parent that already ran torch does
    not survive ``fork`` (the child hangs in its first parallel op), and workers should not
    compete for cores anyway. PyTorch's own DataLoader workers do the same."""
    if os.getpid() != _IMPORTING_PID:
        torch.set_num_threads(1)  # also outside the pipe's calls: the child's pool is broken
        return 1
    return threads


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
