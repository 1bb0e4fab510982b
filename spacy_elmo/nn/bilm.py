"""The bidirectional language model: token encoder + forward and backward LSTM stacks -> layers.

The module: its weights, its shape and its eager forward. How a batch is run fastest is the runner's
choice (``nn/runner.py``).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from ..indexers import ByteIndexer, TokenIndexer
from ..options import BiLMOptions
from .char_cnn import CharacterEncoder
from .directions import BiLMStates, run_directions
from .lstm import DirectionalLSTM, DirectionOutputs, DistinctInputs, LSTMState, length_mask, reverse_padded
from .token_cache import Encoder

#: (the distinct tokens' vectors (n, dim), each direction's rows of them in its reading order (2,
#: batch, T), lengths (batch,), states or None) -> the forward and the backward direction's
#: outputs, in their reading orders, as ``nn/directions.run_directions`` returns them.
Directions = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, Optional[BiLMStates]],
    Tuple[DirectionOutputs, DirectionOutputs],
]


class BiLM(nn.Module):
    """ELMo's biLM.

    ``bilm(char_ids)``: char_ids (batch, max_len, width) int64 from ``bilm.batch_to_ids`` ->
    ``(layers, mask)``: layers (n_layers + 1, batch, max_len, 2 * projection_dim) float, layer 0 the
    token layer ``[x; x]``, layer k ``[forward_k; backward_k]``, padding rows zero; mask (batch,
    max_len) bool. Boundary tokens are added and removed inside.

    Stateless by default, so a sentence's vectors do not depend on its batch; ``stateful=True``
    carries each row's final states into the next call, as bilm-tf and AllenNLP do (``reset_states``
    forgets them)."""

    def __init__(
        self,
        options: BiLMOptions,
        stateful: bool = False,
        indexer: Optional[TokenIndexer] = None,
    ) -> None:
        """``indexer``: tokens -> this model's ids (default: the released UTF-8 byte ids)."""
        super().__init__()
        self.options = options
        self.stateful = stateful
        cnn, lstm = options.char_cnn, options.lstm
        self.indexer = ByteIndexer() if indexer is None else indexer
        self.token_encoder = CharacterEncoder(
            cnn.embedding_dim,
            cnn.filters,
            cnn.n_highway,
            lstm.projection_dim,
            cnn.activation,
            n_characters=self.indexer.n_characters,
            padding_id=self.indexer.padding_id,
            n_words=self.indexer.n_words,
            word_dim=cnn.word_dim,
        )
        directional = dict(
            input_size=lstm.projection_dim,
            hidden_size=lstm.dim,
            proj_size=lstm.projection_dim,
            num_layers=lstm.n_layers,
            cell_clip=lstm.cell_clip,
            proj_clip=lstm.proj_clip,
            use_skip_connections=lstm.use_skip_connections,
        )
        self.forward_lstm = DirectionalLSTM(**directional)
        self.backward_lstm = DirectionalLSTM(**directional)
        self._states: Optional[BiLMStates] = None

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    @property
    def n_output_layers(self) -> int:
        return self.options.n_output_layers

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """Tokenized sentences -> (batch, max_len, width) int64 ids for this model."""
        return self.indexer.batch_to_ids(sentences)

    def reset_states(self) -> None:
        self._states = None

    def forward(
        self,
        char_ids: torch.Tensor,
        *,
        encode: Optional[Encoder] = None,
        directions: Optional[Directions] = None,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """(layers, mask) of ``char_ids``; ``encode``/``directions``: the runner's equivalents."""
        mask = token_mask(char_ids, self.indexer)
        char_ids = char_ids.long()
        batch_size, max_len = mask.shape
        if batch_size == 0:
            empty = self.token_encoder.projection.weight.new_zeros(
                (self.n_output_layers, 0, max_len, self.output_dim)
            )
            return empty, mask
        ids, lengths = self.add_boundaries(char_ids, mask.sum(dim=1))
        padded = length_mask(lengths, ids.shape[1])
        unique, inverse = torch.unique(ids[padded], dim=0, return_inverse=True)
        index = inverse.new_zeros(padded.shape)
        index[padded] = inverse
        rows = (encode or self.token_encoder)(unique)
        tokens = scatter_tokens(DistinctInputs(rows, index), padded)
        reading = torch.stack([index, reverse_padded(index, lengths)])  # the backward LSTM reads rows reversed
        run = directions or self.run_directions
        (forward, forward_states), (backward, backward_states) = run(
            rows, reading, lengths, self._initial_states(batch_size)
        )
        backward = [reverse_padded(y, lengths) for y in backward]
        if self.stateful:
            states = BiLMStates(forward_states, backward_states)
            self._store_states(_each_layer(lambda state: (state[0].detach(), state[1].detach()), states))
        layers = torch.stack(
            [torch.cat([tokens, tokens], dim=-1), *(torch.cat(pair, dim=-1) for pair in zip(forward, backward))]
        )[:, :, 1 : max_len + 1]
        return layers * mask[None, :, :, None].to(layers.dtype), mask

    def add_boundaries(
        self, char_ids: torch.Tensor, lengths: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Ids with ``<S>``/``</S>`` around each row: (batch, max_len + 2, width), lengths + 2."""
        batch_size, max_len, width = char_ids.shape
        ids = char_ids.new_zeros((batch_size, max_len + 2, width))
        ids[:, 1 : max_len + 1] = char_ids
        ids[:, 0] = torch.as_tensor(self.indexer.bos_ids, device=ids.device)
        ids[torch.arange(batch_size, device=ids.device), lengths + 1] = torch.as_tensor(
            self.indexer.eos_ids, device=ids.device
        )
        return ids, lengths + 2

    def run_directions(
        self, rows: torch.Tensor, index: torch.Tensor, lengths: torch.Tensor, states: Optional[BiLMStates]
    ) -> Tuple[DirectionOutputs, DirectionOutputs]:
        """The forward and the backward stack, one after the other (``Directions``)."""
        return run_directions((self.forward_lstm, self.backward_lstm), rows, index, lengths, states)

    def _initial_states(self, batch_size: int) -> Optional[BiLMStates]:
        """Stateful mode: the previous call's final states, zeros for rows that are new."""
        if not self.stateful or self._states is None:
            return None
        return _each_layer(lambda state: _resize_state(state, batch_size), self._states)

    def _store_states(self, new: BiLMStates) -> None:
        """Keep rows of an earlier, larger batch that this batch did not use."""
        self._states = new if self._states is None else _each_layer(_merge_state, self._states, new)


def token_mask(char_ids: torch.Tensor, indexer: TokenIndexer) -> torch.Tensor:
    """The (batch, max_len) mask of real tokens, once the ids are checked (one read back to the
    host), so bad tensors get a clear error instead of a device assert."""
    if not isinstance(char_ids, torch.Tensor):
        raise TypeError(f"BiLM expects a torch.Tensor of character ids, got {type(char_ids).__name__}")
    if char_ids.dim() != 3 or char_ids.shape[-1] != indexer.width:
        raise ValueError(
            f"character ids must have shape (batch, max_len, {indexer.width}), "
            f"got {tuple(char_ids.shape)}; build them with bilm.batch_to_ids"
        )
    if char_ids.dtype.is_floating_point or char_ids.dtype == torch.bool:
        raise TypeError(f"character ids must be an integer tensor, got {char_ids.dtype}")
    mask = (char_ids > 0).any(dim=-1)
    if not char_ids.numel():
        return mask
    limit = max(indexer.n_characters, indexer.n_words)
    prefix = length_mask(mask.sum(dim=1), mask.shape[1])
    out_of_range = ((char_ids < 0) | (char_ids >= limit)).flatten(1).any(dim=1)
    problems = torch.stack([out_of_range, (mask != prefix).any(dim=1)]).cpu()
    if bool(problems[0].any()):
        raise ValueError(f"character ids must lie in [0, {limit}); build them with bilm.batch_to_ids")
    if bool(problems[1].any()):
        row = int(problems[1].nonzero()[0])
        raise ValueError(
            f"character ids row {row} has an all-padding token before its last token; "
            "padding (all-zero rows) may only follow a sentence's tokens"
        )
    return mask


def scatter_tokens(distinct: DistinctInputs, mask: torch.Tensor) -> torch.Tensor:
    """(batch, T, dim) token vectors at the unmasked positions, zeros elsewhere (shapes that do
    not depend on the mask's values, as a CUDA graph or a compiled step needs)."""
    return torch.where(mask[:, :, None], distinct.rows[distinct.index], 0.0)


def _resize_state(state: LSTMState, batch_size: int) -> LSTMState:
    h, c = state
    if h.shape[0] >= batch_size:
        return h[:batch_size], c[:batch_size]
    extra = batch_size - h.shape[0]
    return (
        torch.cat([h, h.new_zeros(extra, h.shape[1])]),
        torch.cat([c, c.new_zeros(extra, c.shape[1])]),
    )


def _merge_state(old: LSTMState, new: LSTMState) -> LSTMState:
    n = new[0].shape[0]
    if old[0].shape[0] <= n:
        return new
    return torch.cat([new[0], old[0][n:]]), torch.cat([new[1], old[1][n:]])


def _each_layer(fn: Callable[..., LSTMState], *states: BiLMStates) -> BiLMStates:
    """``fn`` of each layer's (h, c) in each direction, of ``states`` side by side."""
    forward = [fn(*layers) for layers in zip(*(s.forward for s in states))]
    backward = [fn(*layers) for layers in zip(*(s.backward for s in states))]
    return BiLMStates(forward, backward)
