"""Context-independent token encoder: character embeddings -> CNN -> highway -> projection.

Under "int8" the highway and projection run on int8 weights; the convolutions stay float32 and
(``chunked``) run on fixed-shape chunks so that a token's features never depend on its batch: the
docs/results/cpu-speed.md, "int8 alone and in a batch".
"""

from __future__ import annotations

from typing import Sequence, Tuple

import torch
from torch import nn

from ..chars import N_CHARACTERS, PADDING
from .int8 import int8_linear

#: Tokens per chunked convolution. Chunks of 16 and 32 gave each token the same features in any
#: position and at 1 to 8 threads on this project's CPU (AMD EPYC, oneDNN); chunks of 8 did not
#: (another kernel at 2 threads).
CHUNK_ROWS = 16
#: Character positions a chunk keeps: its tokens' own need rounded up to a multiple of this.
POSITION_STEP = 16


class Highway(nn.Module):
    """One highway layer as bilm-tf has it: ``y = carry * relu(x W_t + b_t) + (1 - carry) * x``,
    ``carry = sigmoid(x W_c + b_c)``; ``linear`` computes ``[transform; carry]`` at once."""

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
    """Character ids of a token -> a context-independent vector: (N, width) int64 (0 = an
    all-padding token) -> (N, output_dim).

    Defaults are the released ELMo's (262 ids, 50 per token, ``padding_id`` 261). With ``word_dim``
    > 0 (ELMoForManyLangs) the last input column is a word id whose embedding is concatenated before
    the projection."""

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

    def forward(self, char_ids: torch.Tensor, chunked: bool = False, all_positions: bool = False) -> torch.Tensor:
        """char_ids (N, width) int64 -> (N, output_dim); ``chunked``: fixed-shape chunks; else
        trailing positions that cannot matter are skipped unless ``all_positions``."""
        if char_ids.shape[0] == 0:
            return char_ids.new_zeros((0, self.output_dim), dtype=self.projection.weight.dtype)
        words = None
        if self.word_embedding is not None:
            words, char_ids = self.word_embedding(char_ids[:, -1]), char_ids[:, :-1]
        if all_positions:
            x = self._convolved(char_ids)
        else:
            needed = self._positions_needed(char_ids)
            x = self._convolved_in_chunks(char_ids, needed) if chunked else self._convolved(char_ids[:, : int(needed.max())])
        for highway in self.highways:
            x = highway(x)
        if words is not None:
            x = torch.cat([words.to(x.dtype), x], dim=-1)
        return int8_linear(self.projection, x)

    def _convolved(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N, positions) ids -> (N, n_filters): each convolution max-pooled, then activated."""
        embedded = self.char_embedding(char_ids).transpose(1, 2)  # (N, embedding_dim, positions)
        act = torch.relu if self.activation == "relu" else torch.tanh
        return torch.cat([act(_max_over_positions(conv(embedded))) for conv in self.convolutions], dim=-1)

    def _convolved_in_chunks(self, char_ids: torch.Tensor, needed: torch.Tensor) -> torch.Tensor:
        """``_convolved`` on ``CHUNK_ROWS`` tokens of one position bucket at a time, padded."""
        buckets = ((needed + POSITION_STEP - 1) // POSITION_STEP * POSITION_STEP).clamp_(max=char_ids.shape[1])
        out = None
        for positions in sorted(set(buckets.tolist())):
            for rows in (buckets == positions).nonzero()[:, 0].split(CHUNK_ROWS):
                ids = char_ids[rows, :positions]
                ids = torch.cat([ids, ids.new_zeros((CHUNK_ROWS - len(rows), positions))])
                features = self._convolved(ids)[: len(rows)]
                if out is None:
                    out = features.new_empty((char_ids.shape[0], features.shape[1]))
                out[rows] = features
        return out

    def _positions_needed(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N,): each token's positions that can change its max (``length + max_width``: windows
        wholly in the padding all give the same value)."""
        real = (char_ids != 0) & (char_ids != self.padding_id)
        return (real.sum(dim=-1) + self._max_width).clamp_(max=char_ids.shape[1])


def _max_over_positions(x: torch.Tensor) -> torch.Tensor:
    """(N, channels, positions) -> (N, channels): ``amax``, or ``max`` with indices where gradients
    flow (a faster backward: docs/results/implementation.md)."""
    return x.max(dim=-1).values if x.requires_grad else x.amax(dim=-1)
