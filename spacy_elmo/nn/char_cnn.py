"""Context-independent token encoder: character embeddings -> CNN -> highway -> projection.

Under the "int8" precision the highway and projection products run on int8 weights
(``nn/int8.py``); the convolutions stay float32 (about a tenth of the biLM's CPU time at the
original shape, and the token cache skips them for frequent words).

The convolutions run on the batch at once, or (``chunked``) on exactly ``CHUNK_ROWS`` tokens of
one character-length bucket at a time, the last chunk padded, so that their shapes never depend
on the batch. oneDNN chooses its kernel by the shape, so a token's float32 features differ in
their last bits with the number of tokens beside it, and int8's rounding of the next products'
inputs turns such differences into visible ones. With int8, whose products are integer (exact
whatever the rows beside), chunked convolutions give every token the vector it gets alone, bit
for bit: what the runner runs for int8 on the CPU (``nn/runner.py``). The convolutions are a
small share of the biLM's time, so their padding costs little.
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

    def forward(self, char_ids: torch.Tensor, chunked: bool = False, all_positions: bool = False) -> torch.Tensor:
        """char_ids: (N, width) int64 -> (N, output_dim); ``chunked``: the convolutions in
        fixed-shape chunks (see the module docstring). Otherwise they skip the trailing positions
        that cannot change the result (which reads the ids' longest token back to the host), unless
        ``all_positions`` (a compiled or graphed training step, whose shapes are fixed)."""
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
        """``_convolved`` on ``CHUNK_ROWS`` tokens at a time, each chunk of one bucket of needed
        positions (``POSITION_STEP``), the last of a bucket padded with all-padding tokens."""
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
        """(N,): how many of each token's character positions change its max-pooled result.

        Every window lying wholly in the trailing padding sees the same input, so gives the same
        value. Keeping ``length + max_width`` positions keeps one such window (or all positions
        when that is not possible), so the max is unchanged, exactly.
        """
        real = (char_ids != 0) & (char_ids != self.padding_id)
        return (real.sum(dim=-1) + self._max_width).clamp_(max=char_ids.shape[1])


def _max_over_positions(x: torch.Tensor) -> torch.Tensor:
    """(N, channels, positions) -> (N, channels): ``amax`` when no gradient flows (the faster
    forward), else ``max`` with its indices, whose backward writes each gradient to its maximum's
    position where ``amax``'s compares every position with the maximum (faster on the CPU:
    docs/manual.md, "Design"). The values are the same; a gradient tied between identical
    windows goes to one of them instead of being split, which gives the weights the same sum."""
    return x.max(dim=-1).values if x.requires_grad else x.amax(dim=-1)
