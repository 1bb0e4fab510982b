"""Context-independent token encoder: character embeddings -> CNN -> highway -> projection.

Under the "int8" precision the highway and projection products run on int8 weights
(``nn/int8.py``); the convolutions stay float32 (about a tenth of the biLM's CPU time at the
original shape, and the token cache skips them for frequent words).

Two ways to run it, the same equations: ``forward`` encodes a batch of tokens at once (training,
GPUs); ``encode_in_chunks`` gives every token the vector it gets alone, bit for bit. BLAS and
oneDNN choose their kernels by the shape of a product, so a token's float32 vector differs in its
last bits with the number of tokens beside it; int8's rounding of the next layer's inputs turns
such differences into visible ones. In chunks, every product runs on exactly ``CHUNK_ROWS``
tokens (the last chunk padded) of one character-length bucket, so its shape never depends on
the batch. What CPU inference runs (``nn/runner.py``).
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn

from ..chars import N_CHARACTERS, PADDING
from .int8 import int8_linear

#: Tokens per product in ``encode_in_chunks``. Chunks of 16 and 32 gave each token the same
#: vector at 1 to 8 threads on this project's CPU (AMD EPYC, oneDNN and MKL kernels); chunks of 8
#: did not (another kernel at 2 threads).
CHUNK_ROWS = 32
#: Character positions a chunk keeps: the token's own need rounded up to a multiple of this.
POSITION_STEP = 16
#: Runs a function over chunks, in order: a plain loop, or pieces on threads (the runner's).
ChunkMap = Callable[[Callable[[torch.Tensor, int], torch.Tensor], List[Tuple[torch.Tensor, int]]], List[torch.Tensor]]


class Highway(nn.Module):
    """One highway layer in bilm-tf's convention.

    ``carry = sigmoid(x W_c + b_c)``; ``y = carry * relu(x W_t + b_t) + (1 - carry) * x``.
    ``linear`` computes ``[transform; carry]`` in one matrix product, shape (dim,) -> (2 * dim,).
    The nonlinearity is relu whatever the CNN activation is (as in bilm-tf).
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.linear = nn.Linear(dim, 2 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (N, dim) -> (N, dim)."""
        transform, carry = int8_linear(self.linear, x).chunk(2, dim=-1)
        carry = torch.sigmoid(carry)
        return carry * torch.relu(transform) + (1.0 - carry) * x


class CharacterEncoder(nn.Module):
    """Character ids of one token -> a context-independent token vector.

    Input (N, width) int64 ids (0 = all-padding token), output (N, output_dim).
    ``convolutions[i]`` is a Conv1d of width ``filters[i][0]`` with ``filters[i][1]`` channels; each
    is max-pooled over all positions, then passed through ``activation``.

    The defaults are the released ELMo's: 262 character ids, 50 per token, ``padding_id`` 261.
    With ``word_dim`` > 0 (ELMoForManyLangs) the last input column is a word id, and its
    ``word_embedding`` row is concatenated before the character features, ahead of the projection.
    """

    def __init__(
        self,
        embedding_dim: int,
        filters: Sequence[Tuple[int, int]],
        n_highway: int,
        output_dim: int,
        activation: str = "relu",
        n_characters: int = N_CHARACTERS,
        padding_id: int = PADDING + 1,
        n_words: int = 0,
        word_dim: int = 0,
    ) -> None:
        super().__init__()
        self.padding_id = padding_id
        self.word_embedding = nn.Embedding(n_words, word_dim, padding_idx=0) if word_dim else None
        self.filters = [tuple(f) for f in filters]
        self.n_filters = sum(n for _, n in self.filters)
        self.output_dim = output_dim
        self.activation = activation
        self.char_embedding = nn.Embedding(n_characters, embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(embedding_dim, n, kernel_size=width) for width, n in self.filters
        )
        self.highways = nn.ModuleList(Highway(self.n_filters) for _ in range(n_highway))
        self.projection = nn.Linear(word_dim + self.n_filters, output_dim)
        self._max_width = max(width for width, _ in self.filters)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        """char_ids: (N, width) int64 -> (N, output_dim), the batch at once."""
        if char_ids.shape[0] == 0:
            return self._empty(char_ids)
        return self._encode(char_ids, int(self._positions_needed(self._characters(char_ids)).max()))

    def encode_in_chunks(self, char_ids: torch.Tensor, map_chunks: Optional[ChunkMap] = None) -> torch.Tensor:
        """char_ids: (N, width) int64 -> (N, output_dim), each token's vector the one it gets
        alone: the tokens grouped by the character positions they need (``POSITION_STEP``), each
        group encoded ``CHUNK_ROWS`` tokens at a time. ``map_chunks(encode, chunks)`` runs
        ``encode(ids, positions)`` over the chunks (default: one after the other)."""
        n = char_ids.shape[0]
        if n == 0:
            return self._empty(char_ids)
        width = self._characters(char_ids).shape[1]
        needed = self._positions_needed(self._characters(char_ids))
        buckets = ((needed + POSITION_STEP - 1) // POSITION_STEP * POSITION_STEP).clamp_(max=width)
        chunks, rows = [], []
        for positions in sorted(set(buckets.tolist())):
            members = (buckets == positions).nonzero()[:, 0]
            for piece in members.split(CHUNK_ROWS):
                ids = char_ids[piece]
                if len(piece) < CHUNK_ROWS:
                    ids = torch.cat([ids, ids.new_zeros((CHUNK_ROWS - len(piece), ids.shape[1]))])
                chunks.append((ids, positions))
                rows.append(piece)
        if map_chunks is None:
            vectors = [self._encode(ids, positions) for ids, positions in chunks]
        else:
            vectors = map_chunks(self._encode, chunks)
        out = vectors[0].new_empty((n, self.output_dim))
        for piece, chunk in zip(rows, vectors):
            out[piece] = chunk[: len(piece)]
        return out

    def _encode(self, char_ids: torch.Tensor, positions: int) -> torch.Tensor:
        """(N, width) ids -> (N, output_dim), the characters cut to their first ``positions``."""
        words = None
        if self.word_embedding is not None:
            words, char_ids = self.word_embedding(char_ids[:, -1]), char_ids[:, :-1]
        char_ids = char_ids[:, :positions]
        # (N, embedding_dim, positions)
        embedded = self.char_embedding(char_ids).transpose(1, 2)
        act = torch.relu if self.activation == "relu" else torch.tanh
        pooled = [act(conv(embedded).amax(dim=-1)) for conv in self.convolutions]
        x = torch.cat(pooled, dim=-1)
        for highway in self.highways:
            x = highway(x)
        if words is not None:
            x = torch.cat([words.to(x.dtype), x], dim=-1)
        return int8_linear(self.projection, x)

    def _empty(self, char_ids: torch.Tensor) -> torch.Tensor:
        return char_ids.new_zeros((0, self.output_dim), dtype=self.projection.weight.dtype)

    def _characters(self, char_ids: torch.Tensor) -> torch.Tensor:
        """The character columns of the ids (without an ELMoForManyLangs word id)."""
        return char_ids if self.word_embedding is None else char_ids[:, :-1]

    def _positions_needed(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N,): how many of each token's character positions change its max-pooled result.

        Every window lying wholly in the trailing padding sees the same input, so gives the same
        value. Keeping ``length + max_width`` positions keeps one such window (or all positions
        when that is not possible), so the max is unchanged, exactly.
        """
        real = (char_ids != 0) & (char_ids != self.padding_id)
        return (real.sum(dim=-1) + self._max_width).clamp_(max=char_ids.shape[1])
