"""Length batching: the one routine that cuts sequences into padded batches of bounded size, for the
``elmo`` pipe and pretraining.
"""

from __future__ import annotations

from typing import List, Sequence, TypeVar

T = TypeVar("T")


def pack_by_length(lengths: Sequence[int], max_tokens: int, overhead: int = 0) -> List[List[int]]:
    """Cut positions ``0 .. len(lengths) - 1``, in the given order, into consecutive batches of
    padded size ``rows * (longest + overhead)`` at most ``max_tokens`` (a sequence too long alone is
    a batch of its own). Sort ``lengths`` first for little padding."""
    batches: List[List[int]] = []
    longest = 0
    for i, length in enumerate(lengths):
        size = length + overhead
        if batches and (len(batches[-1]) + 1) * max(longest, size) <= max_tokens:
            batches[-1].append(i)
            longest = max(longest, size)
        else:
            batches.append([i])
            longest = size
    return batches


def pack_sequences(sequences: Sequence[Sequence[T]], max_tokens: int, overhead: int = 0) -> List[List[Sequence[T]]]:
    """``pack_by_length`` on the sequences themselves: lists of sequences instead of positions."""
    groups = pack_by_length([len(s) for s in sequences], max_tokens, overhead)
    return [[sequences[i] for i in group] for group in groups]


def batch_by_length(lengths: Sequence[int], max_tokens: int) -> List[List[int]]:
    """Indices of ``lengths`` grouped longest first, each padded batch at most ``max_tokens``."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups = pack_by_length([lengths[i] for i in order], max_tokens)
    return [[order[j] for j in group] for group in groups]
