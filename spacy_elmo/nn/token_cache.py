"""A bounded cache of token vectors, filled from the text the biLM sees, so repeated words skip the
character CNN: keyed by a token's ids (an exact match), least recently used out, thread-safe. The
runner empties it when what the vectors depend on changes and bypasses it where gradients flow (the
docs/guide/pytorch.md).
"""

from __future__ import annotations

from typing import Callable, Hashable, List, Optional, Sequence

import numpy as np
import torch

from .lru import LRU

Encoder = Callable[[torch.Tensor], torch.Tensor]


def _row_keys(char_ids: torch.Tensor) -> List[bytes]:
    """(N, width) ids -> N keys, the bytes of each row (as int32: every id fits)."""
    rows = np.ascontiguousarray(char_ids.detach().cpu().numpy().astype(np.int32))
    return [row.tobytes() for row in rows]


class TokenEmbeddingCache:
    """Token vectors of up to ``max_words`` words in one (max_words, dim) tensor on the encoder's
    device; ``prefill_ids`` (n, width) are encoded whenever the cache is (re)filled."""

    def __init__(self, max_words: int, prefill_ids: Optional[torch.Tensor] = None) -> None:
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
            raise ValueError(f"token cache size must be a positive number of words, got {max_words!r}")
        self.max_words = max_words
        self.prefill_ids = None if prefill_ids is None else prefill_ids[:max_words]
        self.state: Optional[Hashable] = None
        #: Each cached word's key -> its row of ``_vectors`` (``nn.lru``; its lock guards both).
        self._slots = LRU(max_words)
        self._vectors: Optional[torch.Tensor] = None

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def hits(self) -> int:
        return self._slots.hits

    @property
    def misses(self) -> int:
        return self._slots.misses

    def ensure_state(
        self, state: Hashable, encoder: Encoder, device: torch.device, batch_size: int = 4096
    ) -> None:
        """Empty (and pre-fill again) the cache if its vectors were made under another ``state``."""
        with self._slots.lock:
            if state == self.state:
                return
            self._slots.clear()
            self._vectors = None
            if self.prefill_ids is not None and len(self.prefill_ids):
                ids = self.prefill_ids.to(device)
                vectors = torch.cat([encoder(chunk) for chunk in ids.split(batch_size)])
                self._insert(_row_keys(ids), vectors)
            self.state = state

    def encode(self, char_ids: torch.Tensor, encoder: Encoder) -> torch.Tensor:
        """(N, width) distinct rows of ids -> (N, dim), ``encoder`` on the uncached ones."""
        keys = _row_keys(char_ids)
        with self._slots.lock:
            slots = [self._slots.get(key) for key in keys]
            hit_rows = [i for i, slot in enumerate(slots) if slot is not None]
            hit_vectors = None
            if hit_rows:
                hit_slots = torch.tensor([slots[i] for i in hit_rows], device=self._vectors.device)
                hit_vectors = self._vectors.index_select(0, hit_slots)  # a copy: safe from eviction
        miss_rows = [i for i, slot in enumerate(slots) if slot is None]
        if not miss_rows:
            return hit_vectors
        missed = encoder(char_ids[torch.tensor(miss_rows, device=char_ids.device)])
        with self._slots.lock:
            self._insert([keys[i] for i in miss_rows], missed)
        if hit_vectors is None:
            return missed
        out = missed.new_empty((len(keys), missed.shape[1]))
        out[torch.tensor(miss_rows, device=out.device)] = missed
        out[torch.tensor(hit_rows, device=out.device)] = hit_vectors.to(out.dtype)
        return out

    def _insert(self, keys: Sequence[bytes], vectors: torch.Tensor) -> None:
        """Store ``vectors`` under ``keys`` (the lock held), evicting the least recently used."""
        if self._vectors is None:
            self._vectors = vectors.new_empty((self.max_words, vectors.shape[1]))
        rows, slots = [], []
        for row, key in enumerate(keys):
            if key in self._slots:
                continue  # another thread cached it meanwhile
            slot = len(self._slots) if len(self._slots) < self.max_words else self._slots.pop_oldest()[1]
            self._slots.put(key, slot)
            rows.append(row)
            slots.append(slot)
        # The last max_words inserted win when a call brings more words than the cache holds.
        if rows:
            rows_t = torch.tensor(rows[-self.max_words :], device=vectors.device)
            slots_t = torch.tensor(slots[-self.max_words :], device=self._vectors.device)
            self._vectors[slots_t] = vectors.index_select(0, rows_t).to(self._vectors.dtype)

