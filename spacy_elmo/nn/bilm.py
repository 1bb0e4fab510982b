"""The bidirectional language model: token encoder + forward and backward LSTM stacks -> layers."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from ..indexers import ByteIndexer, TokenIndexer
from ..options import BiLMOptions
from .char_cnn import CharacterEncoder
from .cuda_graphs import LSTMGraphs, pays_off
from .lstm import DirectionalLSTM, DistinctInputs, LSTMState, length_mask
from .precision import get_precision, precision_context
from .threads import run_side_by_side, torch_threads
from .token_cache import TokenEmbeddingCache


@dataclass
class BiLMStates:
    """Final LSTM states of each batch row, per layer: (h, c) for each direction."""

    forward: List[LSTMState]
    backward: List[LSTMState]


@dataclass
class BiLMActivations:
    """All activations of a batch, boundary tokens included.

    token_embedding: (batch, max_len + 2, projection_dim), padding rows zero.
    forward / backward: per LSTM layer, (batch, max_len + 2, projection_dim).
    mask: (batch, max_len + 2) bool, True for ``<S>``, the tokens and ``</S>``.
    """

    token_embedding: torch.Tensor
    forward: List[torch.Tensor]
    backward: List[torch.Tensor]
    mask: torch.Tensor
    states: BiLMStates


class BiLM(nn.Module):
    """ELMo's biLM.

    ``bilm(char_ids)`` with char_ids (batch, max_len, width) int64 from ``bilm.batch_to_ids``
    (``bilm.indexer``: UTF-8 byte ids, width 50, for the released models) returns
    ``(layers, mask)``: layers (n_layers + 1, batch, max_len, 2 * projection_dim) float, where layer
    0 is the token layer duplicated ``[x; x]`` and layer k is ``[forward_k; backward_k]``; the
    sentence-boundary tokens are added and removed internally; padding rows are zero; mask is
    (batch, max_len) bool.

    Stateless by default: every call starts from zero LSTM states, so a sentence's vectors do not
    depend on its batch. With ``stateful=True`` each batch row starts from the final states of the
    same row in the previous call, as bilm-tf and AllenNLP do (call ``reset_states`` to forget).

    Speed settings that keep the weights as they are:
    - ``cache_token_embeddings(words, max_words)``: the token vectors of the words the biLM has
      seen (up to ``max_words``, least recently used out; ``words`` pre-fill it) are looked up
      instead of computed again, skipping the character CNN and highway layers while no gradient
      is needed; equal to the uncached vectors up to float rounding.
    - ``precision = "bf16"`` or ``"fp16"``: ``forward`` runs under ``torch.autocast`` (matrix
      products and convolutions in that dtype, LSTM cell states in float32) and returns float32.
      ``"tf32"``: float32 with TensorFloat-32 products on CUDA. Not exact: docs/manual.md gives the
      measured deviation. ``"fp32"`` (default) turns TF32 off for the call, which cuDNN
      convolutions otherwise use by default. The modes are defined in ``nn/precision.py``.
    - ``threads = n`` (default 1), on the CPU where no gradient is needed: the forward and the
      backward LSTM stacks, which share nothing after the token layer, run side by side on two
      threads, and with 4, 6, ... threads on that many shards of the batch (rows balanced by
      tokens) times the two directions; the character CNN and highway layers split the batch's
      distinct tokens. Each thread runs single-threaded ops (``nn/threads.py``
      ``run_side_by_side``), so the threads meet once per batch instead of at every op of every
      time step as PyTorch's own intra-op threads do. Each row's ops are the ops of the one-thread
      path: the outputs are those of ``threads = 1`` up to float rounding. Where gradients flow
      (training, fine-tuning) the biLM runs as with one thread, on PyTorch's own thread setting.
    - ``cuda_graphs`` (default True), on CUDA where no gradient is needed, from zero states, for
      batches of up to 128 sentences: the two LSTM stacks run as recorded CUDA graphs, the
      backward stack on a second stream (``nn/cuda_graphs.py``, with the measurements that set
      the limit); equal to the eager loop up to float rounding.
    """

    def __init__(
        self,
        options: BiLMOptions,
        stateful: bool = False,
        precision: str = "fp32",
        indexer: Optional[TokenIndexer] = None,
    ) -> None:
        """``indexer``: what turns tokens into this model's ids (default: the released UTF-8 byte
        ids); a weight format's reader says which one its model needs."""
        super().__init__()
        self.options = options
        self.stateful = stateful
        self.precision = precision
        self.threads = 1
        self.cuda_graphs = True
        self._graphs: Optional[LSTMGraphs] = None
        self.token_cache: Optional[TokenEmbeddingCache] = None
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
        self.forward_lstm = DirectionalLSTM(**directional, go_forward=True)
        self.backward_lstm = DirectionalLSTM(**directional, go_forward=False)
        self._states: Optional[BiLMStates] = None

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    @property
    def n_output_layers(self) -> int:
        return self.options.n_output_layers

    @property
    def precision(self) -> str:
        return self._precision

    @precision.setter
    def precision(self, value: str) -> None:
        self._precision = get_precision(value, "BiLM precision").name

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """Tokenized sentences -> (batch, max_len, width) int64 ids for this model."""
        return self.indexer.batch_to_ids(sentences)

    def reset_states(self) -> None:
        self._states = None

    def cache_token_embeddings(self, words: Sequence[str] = (), max_words: Optional[int] = None) -> int:
        """Keep the token vectors of up to ``max_words`` words (default: as many as ``words``),
        filled from the batches the biLM runs, the least recently used evicted first; ``words``
        (AllenNLP's ``vocab_to_cache``, a vocabulary's most frequent words) are computed now, to
        pre-fill it. Cached words skip the character CNN and highway layers wherever no gradient
        is needed. The cache is not saved with the weights, and is emptied (and pre-filled again)
        when the precision or the token encoder's weights, device or dtype change. Returns the
        number of words cached now."""
        distinct = list(dict.fromkeys(words))
        prefill = torch.from_numpy(self.indexer.tokens_to_ids(distinct)) if distinct else None
        self.token_cache = TokenEmbeddingCache(max_words or len(distinct), prefill)
        device = self.token_encoder.projection.weight.device
        with torch.no_grad(), precision_context(self.precision, device):
            self.token_cache.ensure_state(self._token_cache_state(), self._encode_tokens, device)
        return len(self.token_cache)

    def clear_token_cache(self) -> None:
        self.token_cache = None

    def forward(self, char_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        side_by_side = self._side_by_side(char_ids.device)
        with torch_threads(1) if side_by_side else contextlib.nullcontext():
            with precision_context(self.precision, char_ids.device):
                layers, mask = self._forward(char_ids)
        return layers.float(), mask

    def _side_by_side(self, device: torch.device, dropout: float = 0.0) -> bool:
        """Whether this call splits its work over ``threads`` (CPU, inference, no dropout)."""
        return self.threads > 1 and device.type == "cpu" and self._inference_only(dropout)

    def _inference_only(self, dropout: float) -> bool:
        """No gradient is needed and no dropout applies: the speed paths may run."""
        return not (dropout > 0 and self.training) and not _needs_gradient(self)

    def _graphed(self, tokens: torch.Tensor, states: Optional[BiLMStates], dropout: float) -> bool:
        """Whether the LSTM stacks run as CUDA graphs in this call (``cuda_graphs``: CUDA, a batch
        small enough that they pay off, no gradient, zero initial states, no dropout, and not
        inside the caller's own recording)."""
        return (
            self.cuda_graphs
            and tokens.device.type == "cuda"
            and pays_off(tokens.shape[0])
            and states is None
            and self._inference_only(dropout)
            and not torch.cuda.is_current_stream_capturing()
        )

    def _lstm_graphs(self) -> LSTMGraphs:
        if self._graphs is None:
            self._graphs = LSTMGraphs(self.forward_lstm, self.backward_lstm)
        return self._graphs

    def __getstate__(self) -> dict:
        """Pickles and deep copies leave the recorded graphs behind (they hold this process's GPU
        memory and are recorded again on first use)."""
        state = self.__dict__.copy()
        state["_graphs"] = None
        return state

    def _in_worker(self, work: Callable[[], object]) -> Callable[[], object]:
        """``work`` as a task for ``run_side_by_side``: grad mode and autocast are per thread,
        so the task enters them itself (the int8 switch travels in the copied context)."""
        dtype = get_precision(self.precision).autocast_dtype

        def task():
            with torch.no_grad():
                if dtype is None:
                    return work()
                with torch.autocast(device_type="cpu", dtype=dtype):
                    return work()

        return task

    def _forward(self, char_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        mask = _validate_char_ids(char_ids, self.indexer)
        char_ids = char_ids.long()
        batch_size, max_len = mask.shape
        if batch_size == 0:
            empty = self.token_encoder.projection.weight.new_zeros(
                (self.n_output_layers, 0, max_len, self.output_dim)
            )
            return empty, mask
        ids, lengths = self.add_boundaries(char_ids, mask.sum(dim=1))
        acts = self.activations(ids, lengths, self._initial_states(batch_size))
        if self.stateful:
            self._store_states(_detached(acts.states))
        layers = self.stack_layers(acts)[:, :, 1 : max_len + 1]
        return layers * mask[None, :, :, None].to(layers.dtype), mask

    def add_boundaries(
        self, char_ids: torch.Tensor, lengths: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """(batch, max_len, width) -> (batch, max_len + 2, width) with the indexer's ``<S>`` first
        and ``</S>`` after each row's last token; returns the new ids and lengths + 2."""
        batch_size, max_len, width = char_ids.shape
        ids = char_ids.new_zeros((batch_size, max_len + 2, width))
        ids[:, 1 : max_len + 1] = char_ids
        ids[:, 0] = torch.as_tensor(self.indexer.bos_ids, device=ids.device)
        ids[torch.arange(batch_size, device=ids.device), lengths + 1] = torch.as_tensor(
            self.indexer.eos_ids, device=ids.device
        )
        return ids, lengths + 2

    def activations(
        self,
        char_ids: torch.Tensor,
        lengths: torch.Tensor,
        states: Optional[BiLMStates] = None,
        dropout: float = 0.0,
    ) -> BiLMActivations:
        """Run the biLM on ids that already hold their boundary tokens (or any token windows, as
        in pretraining). char_ids (batch, T, 50), lengths (batch,) >= 1, states from a previous
        call or None for zeros; ``dropout`` on each LSTM input (training only)."""
        mask = length_mask(lengths, char_ids.shape[1])
        return self.contextualize(self._embed_distinct(char_ids, mask), lengths, states, dropout)

    def contextualize(
        self,
        distinct: DistinctInputs,
        lengths: torch.Tensor,
        states: Optional[BiLMStates] = None,
        dropout: float = 0.0,
    ) -> BiLMActivations:
        """Both LSTM directions over already encoded tokens: ``distinct.rows`` (U, dim) vectors
        of the distinct tokens, ``distinct.index`` (batch, T) into them. ``activations`` and the
        pretraining model (which encodes each batch's distinct tokens itself) both end here."""
        mask = length_mask(lengths, distinct.index.shape[1])
        tokens = _scatter_tokens(distinct, mask)
        if self._graphed(tokens, states, dropout):
            (forward, forward_states), (backward, backward_states) = self._lstm_graphs().run(
                tokens, lengths, self.precision, get_precision(self.precision).autocast_dtype
            )
        elif self._side_by_side(tokens.device, dropout):
            (forward, forward_states), (backward, backward_states) = self._directions_side_by_side(
                tokens, lengths, states, distinct
            )
        else:
            forward, forward_states = self.forward_lstm(
                tokens, lengths, states and states.forward, dropout, distinct
            )
            backward, backward_states = self.backward_lstm(
                tokens, lengths, states and states.backward, dropout, distinct
            )
        return BiLMActivations(
            tokens, forward, backward, mask, BiLMStates(forward_states, backward_states)
        )

    def _directions_side_by_side(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        states: Optional[BiLMStates],
        distinct: DistinctInputs,
    ) -> Tuple[Tuple[List[torch.Tensor], List[LSTMState]], Tuple[List[torch.Tensor], List[LSTMState]]]:
        """Both directions on ``threads`` threads: ``threads // 2`` shards of the batch's rows
        (balanced by tokens) times the two directions, each piece single-threaded; the pieces'
        outputs and final states are put back in batch order."""
        shards = _balanced_shards(lengths, max(1, min(self.threads // 2, tokens.shape[0])))
        whole = len(shards) == 1
        tasks = []
        for rows in shards:
            shard_distinct = distinct if whole else _distinct_rows_of(distinct, rows, lengths)
            shard_tokens, shard_lengths = (tokens, lengths) if whole else (tokens[rows], lengths[rows])
            for lstm, lstm_states in (
                (self.forward_lstm, states and states.forward),
                (self.backward_lstm, states and states.backward),
            ):
                if lstm_states and not whole:
                    lstm_states = [(h[rows], c[rows]) for h, c in lstm_states]
                arguments = (shard_tokens, shard_lengths, lstm_states, 0.0, shard_distinct)
                tasks.append(self._in_worker(lambda lstm=lstm, arguments=arguments: lstm(*arguments)))
        results = run_side_by_side(tasks)
        if whole:
            return results[0], results[1]
        order = torch.argsort(torch.cat(shards))
        return tuple(
            _gather_shards([results[2 * k + direction] for k in range(len(shards))], order)
            for direction in (0, 1)
        )

    def _encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N, width) ids -> (N, dim) token vectors; split over ``threads`` (``_side_by_side``)."""
        n_pieces = min(self.threads, char_ids.shape[0])
        if n_pieces < 2 or not self._side_by_side(char_ids.device):
            return self.token_encoder(char_ids)
        tasks = [
            self._in_worker(lambda piece=piece: self.token_encoder(piece))
            for piece in char_ids.tensor_split(n_pieces)
        ]
        return torch.cat(run_side_by_side(tasks))

    def _embed_distinct(self, char_ids: torch.Tensor, mask: torch.Tensor) -> DistinctInputs:
        """The vectors of the distinct unmasked tokens and a (batch, T) index into them (0 where
        masked). Each distinct token of the batch is encoded once: words repeat within a batch,
        and every row has ``<S>`` and ``</S>``."""
        unique, inverse = torch.unique(char_ids[mask], dim=0, return_inverse=True)
        if self.token_cache is not None and not _needs_gradient(self.token_encoder):
            self.token_cache.ensure_state(self._token_cache_state(), self._encode_tokens, char_ids.device)
            encoded = self.token_cache.encode(unique, self._encode_tokens)
        else:
            encoded = self._encode_tokens(unique)
        index = inverse.new_zeros(mask.shape)
        index[mask] = inverse
        return DistinctInputs(encoded, index)

    @staticmethod
    def stack_layers(acts: BiLMActivations) -> torch.Tensor:
        """(n_layers + 1, batch, T, 2 * projection_dim): [x; x], then [forward_k; backward_k]."""
        layers = [torch.cat([acts.token_embedding, acts.token_embedding], dim=-1)]
        layers += [torch.cat(pair, dim=-1) for pair in zip(acts.forward, acts.backward)]
        return torch.stack(layers)

    def _token_cache_state(self) -> tuple:
        """What cached token vectors depend on: the precision and the encoder's weights (an
        in-place update, as an optimizer step or ``load_state_dict`` makes, bumps a tensor's
        version; ``.to()`` makes new tensors)."""
        weights = tuple(
            (p._version, p.data_ptr(), p.dtype, p.device) for p in self.token_encoder.parameters()
        )
        return self.precision, weights

    def _initial_states(self, batch_size: int) -> Optional[BiLMStates]:
        """Stateful mode: the previous call's final states for the first ``batch_size`` rows,
        zeros for rows that are new."""
        if not self.stateful or self._states is None:
            return None
        return BiLMStates(
            [_resize_state(s, batch_size) for s in self._states.forward],
            [_resize_state(s, batch_size) for s in self._states.backward],
        )

    def _store_states(self, new: BiLMStates) -> None:
        """Keep rows of an earlier, larger batch that this batch did not use."""
        if self._states is not None:
            new = BiLMStates(
                [_merge_state(old, s) for old, s in zip(self._states.forward, new.forward)],
                [_merge_state(old, s) for old, s in zip(self._states.backward, new.backward)],
            )
        self._states = new


def _balanced_shards(lengths: torch.Tensor, n_shards: int) -> List[torch.Tensor]:
    """Row indices of ``n_shards`` shards of the batch, with near-equal numbers of tokens: rows
    longest first, each to the shard with the fewest tokens so far; each shard's rows in order."""
    if n_shards <= 1:
        return [torch.arange(lengths.shape[0], device=lengths.device)]
    loads = [0] * n_shards
    members: List[List[int]] = [[] for _ in range(n_shards)]
    lengths_list = lengths.tolist()
    for row in sorted(range(len(lengths_list)), key=lambda r: -lengths_list[r]):
        k = loads.index(min(loads))
        members[k].append(row)
        loads[k] += lengths_list[row]
    return [torch.tensor(sorted(m), dtype=torch.long, device=lengths.device) for m in members if m]


def _distinct_rows_of(distinct: DistinctInputs, rows: torch.Tensor, lengths: torch.Tensor) -> DistinctInputs:
    """The distinct inputs of the batch rows ``rows`` only (so that a shard's first layer computes
    the input products of its own tokens, not of the whole batch's)."""
    index = distinct.index[rows]
    mask = length_mask(lengths[rows], index.shape[1])
    used, inverse = torch.unique(index[mask], return_inverse=True)
    shard_index = index.new_zeros(index.shape)
    shard_index[mask] = inverse
    return DistinctInputs(distinct.rows[used], shard_index)


def _gather_shards(
    pieces: List[Tuple[List[torch.Tensor], List[LSTMState]]], order: torch.Tensor
) -> Tuple[List[torch.Tensor], List[LSTMState]]:
    """One direction's per-shard (outputs per layer, final states per layer) -> the whole batch's,
    rows back in batch order (``order``: the inverse of the shards' concatenated rows)."""
    n_layers = len(pieces[0][0])
    outputs = [torch.cat([p[0][i] for p in pieces]).index_select(0, order) for i in range(n_layers)]
    states = [
        tuple(torch.cat([p[1][i][part] for p in pieces]).index_select(0, order) for part in (0, 1))
        for i in range(n_layers)
    ]
    return outputs, states


def _scatter_tokens(distinct: DistinctInputs, mask: torch.Tensor) -> torch.Tensor:
    """(batch, T, dim) token vectors at the unmasked positions, zeros elsewhere."""
    tokens = distinct.rows.new_zeros(mask.shape + (distinct.rows.shape[-1],))
    tokens[mask] = distinct.rows[distinct.index[mask]]
    return tokens


def _needs_gradient(module: nn.Module) -> bool:
    return torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters())


def _validate_char_ids(char_ids: torch.Tensor, indexer) -> torch.Tensor:
    """Check shape and padding of the input; return the (batch, max_len) token mask."""
    if not isinstance(char_ids, torch.Tensor):
        raise TypeError(f"BiLM expects a torch.Tensor of character ids, got {type(char_ids).__name__}")
    if char_ids.dim() != 3 or char_ids.shape[-1] != indexer.width:
        raise ValueError(
            f"character ids must have shape (batch, max_len, {indexer.width}), "
            f"got {tuple(char_ids.shape)}; build them with bilm.batch_to_ids"
        )
    if char_ids.dtype.is_floating_point or char_ids.dtype == torch.bool:
        raise TypeError(f"character ids must be an integer tensor, got {char_ids.dtype}")
    limit = max(indexer.n_characters, indexer.n_words)
    if char_ids.numel() and (int(char_ids.min()) < 0 or int(char_ids.max()) >= limit):
        raise ValueError(f"character ids must lie in [0, {limit}); build them with bilm.batch_to_ids")
    mask = (char_ids > 0).any(dim=-1)
    lengths = mask.sum(dim=1)
    prefix = torch.arange(mask.shape[1], device=mask.device)[None, :] < lengths[:, None]
    if not torch.equal(mask, prefix):
        row = int((mask != prefix).any(dim=1).nonzero()[0])
        raise ValueError(
            f"character ids row {row} has an all-padding token before its last token; "
            "padding (all-zero rows) may only follow a sentence's tokens"
        )
    return mask


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


def _detached(states: BiLMStates) -> BiLMStates:
    return BiLMStates(
        [(h.detach(), c.detach()) for h, c in states.forward],
        [(h.detach(), c.detach()) for h, c in states.backward],
    )
