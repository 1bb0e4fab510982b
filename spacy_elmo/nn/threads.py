"""PyTorch's intra-op thread count for one block of work, restored after it.

PyTorch starts as many OpenMP threads as the machine has cores. When other processes keep those
cores busy, its threads wait for each other at every parallel op: on a 2-core machine shared
with one other job, ``en_core_web_sm`` + elmo ran 25x slower with 2 threads than with 1. The pipe,
``embed``, ``demo`` and pretraining take a ``threads`` setting and enter this context, so the
caller's own torch setting is what it was after the call.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch


def check_threads(value: Optional[int], what: str) -> Optional[int]:
    """``value`` if it is None or a positive int, else a ValueError naming ``what`` (the key)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{what} must be a positive integer or null (PyTorch's own setting), got {value!r}")
    return value


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
