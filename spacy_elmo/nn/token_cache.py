"""A cache of context-independent token vectors for a fixed word list (AllenNLP's
``vocab_to_cache``): frequent words skip the character CNN and the highway layers.

Lookups are keyed on a token's row of ids (50 character ids for the released models), so the
cache works on whatever the biLM's ``batch_to_ids`` produced. Each row of ids is hashed to one int64 (a wrapping polynomial
hash, vectorised on the tensor's device), found by binary search among the cached hashes, and then
compared id for id with the cached row: a hash collision can only cause a miss, never a wrong
vector. Misses go through the encoder as usual.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from ..chars import tokens_to_ids


def _hash_rows(char_ids: torch.Tensor) -> torch.Tensor:
    """(N, width) int64 ids -> (N,) int64 hashes: the dot product with ``width`` fixed odd 64-bit
    multipliers, wrapping around int64 (a hash, not an identity: ``lookup`` checks the ids)."""
    return (char_ids * _odd_multipliers(char_ids.shape[-1]).to(char_ids.device)).sum(dim=-1)


@functools.lru_cache(maxsize=None)
def _odd_multipliers(n: int) -> torch.Tensor:
    """n odd int64 constants from a linear congruential sequence (fixed, so hashes are stable)."""
    values = []
    value = 1
    for _ in range(n):
        value = (value * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % 2**64 | 1
        values.append(value - 2**64 if value >= 2**63 else value)
    return torch.tensor(values, dtype=torch.int64)


class TokenEmbeddingCache(nn.Module):
    """Token vectors of ``words``, computed once by ``encoder`` (an ``nn.Module`` mapping (N, width)
    ids to (N, dim) vectors); ``to_ids`` is the biLM's indexer (default: the released byte ids).

    The tensors are non-persistent buffers: they follow ``.to(device)`` but never enter the
    ``state_dict``, so checkpoints and weight files are unchanged by caching.
    """

    def __init__(
        self,
        words: Sequence[str],
        encoder: nn.Module,
        to_ids: Callable[[Sequence[str]], np.ndarray] = tokens_to_ids,
        batch_size: int = 4096,
    ) -> None:
        super().__init__()
        unique = list(dict.fromkeys(words))
        device = next(encoder.parameters()).device
        char_ids = torch.from_numpy(to_ids(unique)).to(device)
        hashes = _hash_rows(char_ids)
        order = torch.argsort(hashes)
        self.register_buffer("hashes", hashes[order], persistent=False)
        self.register_buffer("char_ids", char_ids[order], persistent=False)
        self.register_buffer("vectors", torch.zeros(0), persistent=False)
        self.refresh(encoder, batch_size)

    def __len__(self) -> int:
        return int(self.hashes.shape[0])

    def lookup(self, char_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(N, width) ids of a non-empty cache -> (hit (N,) bool, index (N,) int64 into
        ``vectors``, valid where hit)."""
        hashes = _hash_rows(char_ids)
        index = torch.searchsorted(self.hashes, hashes).clamp_(max=len(self) - 1)
        hit = (self.hashes[index] == hashes) & (self.char_ids[index] == char_ids).all(dim=-1)
        return hit, index

    def refresh(self, encoder: nn.Module, batch_size: int = 4096) -> None:
        """Recompute the cached vectors with ``encoder``'s current weights."""
        with torch.no_grad():
            chunks = [encoder(chunk) for chunk in self.char_ids.split(batch_size)]
        self.vectors = torch.cat(chunks) if chunks else self.vectors.new_zeros(0)

    def encode(self, char_ids: torch.Tensor, encoder: nn.Module) -> torch.Tensor:
        """(N, width) ids -> (N, dim): cached vectors for known words, ``encoder`` for the rest."""
        if len(self) == 0:
            return encoder(char_ids)
        hit, index = self.lookup(char_ids)
        if bool(hit.all()):
            return self.vectors[index]
        out = self.vectors.new_empty((char_ids.shape[0], self.vectors.shape[1]))
        out[hit] = self.vectors[index[hit]]
        miss = ~hit
        out[miss] = encoder(char_ids[miss]).to(out.dtype)
        return out
