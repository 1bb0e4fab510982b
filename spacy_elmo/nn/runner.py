"""How a BiLM is run: ``BiLMRunner(bilm)(char_ids)`` returns ``bilm(char_ids)`` in float32, in its
``precision``, as CUDA graphs, side by side on ``threads``, with a token cache, or eagerly; where
gradients flow only the precision applies. What the pipe runs. docs/guide/pytorch.md
and docs/guide/speed.md.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn

from .bilm import BiLM, BiLMStates, DirectionOutputs
from .cuda_graphs import LSTMGraphs, pays_off
from .lstm import DistinctInputs, length_mask
from .precision import get_precision, precision_context
from .side_by_side import run_side_by_side_of
from .token_cache import TokenEmbeddingCache
from .versions import weights_key


class BiLMRunner(nn.Module):
    """Runs ``bilm`` (a submodule: the runner's parameters are the biLM's) the fastest way that
    gives its outputs. ``bilm`` None: a runner that waits for its weights (``replace_bilm``)."""

    def __init__(
        self, bilm: Optional[BiLM] = None, precision: str = "fp32", threads: int = 1, cuda_graphs: bool = True
    ) -> None:
        super().__init__()
        self.bilm = bilm
        self.precision = precision
        self.threads = threads
        self.cuda_graphs = cuda_graphs
        self.token_cache: Optional[TokenEmbeddingCache] = None
        self._graphs: Optional[LSTMGraphs] = None

    def replace_bilm(self, bilm: Optional[BiLM]) -> None:
        """Run ``bilm`` from now on; the previous one's graphs and token cache go."""
        self.bilm = bilm
        self.token_cache = None
        self._graphs = None

    @property
    def precision(self) -> str:
        return self._precision

    @precision.setter
    def precision(self, value: str) -> None:
        self._precision = get_precision(value, "BiLMRunner precision").name

    def forward(self, char_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The biLM's ``(layers, mask)`` of ``char_ids``, layers in float32."""
        with precision_context(self.precision, char_ids.device):
            layers, mask = self.bilm(char_ids, encode=self._encode, directions=self._directions)
        return layers.float(), mask

    def cache_token_embeddings(self, words: Sequence[str] = (), max_words: Optional[int] = None) -> int:
        """Keep the token vectors of up to ``max_words`` words (default: as many as ``words``),
        least recently used out; ``words`` (AllenNLP's ``vocab_to_cache``) are computed now to
        pre-fill it. Not saved; emptied when the precision or the token encoder's weights, device or
        dtype change. Returns the number of words cached now."""
        distinct = list(dict.fromkeys(words))
        prefill = torch.from_numpy(self.bilm.indexer.tokens_to_ids(distinct)) if distinct else None
        self.token_cache = TokenEmbeddingCache(max_words or len(distinct), prefill)
        device = self.bilm.token_encoder.projection.weight.device
        with torch.no_grad(), precision_context(self.precision, device):
            self.token_cache.ensure_state(self._token_cache_state(), self._encode_tokens, device)
        return len(self.token_cache)

    def clear_token_cache(self) -> None:
        self.token_cache = None

    def __getstate__(self) -> dict:
        """Pickles and copies leave the recorded graphs behind (recorded again on first use)."""
        state = self.__dict__.copy()
        state["_graphs"] = None
        return state

    # ---------------------------------------------------------------- the paths
    def _side_by_side(self, device: torch.device) -> bool:
        """Whether this call splits its work over ``threads`` (CPU, no gradient)."""
        return self.threads > 1 and device.type == "cpu" and not _needs_gradient(self.bilm)

    def _graphed(self, tokens: torch.Tensor, states: Optional[BiLMStates]) -> bool:
        """Whether the LSTM stacks run as CUDA graphs in this call: CUDA, a batch small enough, no
        gradient, zero states, not inside the caller's own recording."""
        return (
            self.cuda_graphs
            and tokens.device.type == "cuda"
            and pays_off(tokens.shape[0])
            and states is None
            and not _needs_gradient(self.bilm)
            and not torch.cuda.is_current_stream_capturing()
        )

    def _encode(self, unique: torch.Tensor) -> torch.Tensor:
        """The batch's distinct tokens -> their vectors, through the token cache if any."""
        if self.token_cache is None or _needs_gradient(self.bilm.token_encoder):
            return self._encode_tokens(unique)
        self.token_cache.ensure_state(self._token_cache_state(), self._encode_tokens, unique.device)
        return self.token_cache.encode(unique, self._encode_tokens)

    def _encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """(N, width) ids -> (N, dim) token vectors, split over ``threads``; int8 on the CPU runs
        the convolutions in fixed-shape chunks, so each token's vector is the one it gets alone."""
        encoder = self.bilm.token_encoder
        chunked = get_precision(self.precision).int8 and char_ids.device.type == "cpu"
        n_pieces = min(self.threads, char_ids.shape[0])
        if n_pieces < 2 or not self._side_by_side(char_ids.device):
            return encoder(char_ids, chunked)
        runs = [lambda _, piece=piece: encoder(piece, chunked) for piece in char_ids.tensor_split(n_pieces)]
        return torch.cat(self._on_threads(runs, char_ids))

    def _directions(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        states: Optional[BiLMStates],
        distinct: DistinctInputs,
    ) -> Tuple[DirectionOutputs, DirectionOutputs]:
        if self._graphed(tokens, states):
            return self._lstm_graphs().run(tokens, lengths, self.precision)
        if self._side_by_side(tokens.device):
            return self._directions_side_by_side(tokens, lengths, states, distinct)
        return self.bilm.run_directions(tokens, lengths, states, distinct)

    def _lstm_graphs(self) -> LSTMGraphs:
        if self._graphs is None:
            self._graphs = LSTMGraphs(self.bilm.forward_lstm, self.bilm.backward_lstm)
        return self._graphs

    def _on_threads(self, runs: List[Callable[[torch.Tensor], Any]], x: torch.Tensor) -> List[Any]:
        """``[run(x) for run in runs]`` on threads, without gradients, each in the precision."""
        precision = self.precision
        with torch.no_grad():
            return run_side_by_side_of(runs, x, "threads", context=lambda: precision_context(precision, x.device))

    def _directions_side_by_side(
        self,
        tokens: torch.Tensor,
        lengths: torch.Tensor,
        states: Optional[BiLMStates],
        distinct: DistinctInputs,
    ) -> Tuple[DirectionOutputs, DirectionOutputs]:
        """Both directions on ``threads`` threads (``nn/side_by_side.py``): ``threads // 2`` shards
        of rows balanced by tokens, times the two directions, put back in batch order."""
        bilm = self.bilm
        shards = _balanced_shards(lengths, max(1, min(self.threads // 2, tokens.shape[0])))
        whole = len(shards) == 1
        runs = []
        for rows in shards:
            shard_distinct = distinct if whole else _distinct_rows_of(distinct, rows, lengths)
            shard_tokens, shard_lengths = (tokens, lengths) if whole else (tokens[rows], lengths[rows])
            for lstm, lstm_states in (
                (bilm.forward_lstm, states and states.forward),
                (bilm.backward_lstm, states and states.backward),
            ):
                if lstm_states and not whole:
                    lstm_states = [(h[rows], c[rows]) for h, c in lstm_states]
                arguments = (shard_tokens, shard_lengths, lstm_states, 0.0, shard_distinct)
                runs.append(lambda _, lstm=lstm, arguments=arguments: lstm(*arguments))
        results = self._on_threads(runs, tokens)
        if whole:
            return results[0], results[1]
        order = torch.argsort(torch.cat(shards))
        return tuple(
            _gather_shards([results[2 * k + direction] for k in range(len(shards))], order)
            for direction in (0, 1)
        )

    def _token_cache_state(self) -> tuple:
        """What cached token vectors depend on: the precision and the encoder's weights."""
        return self.precision, weights_key(self.bilm.token_encoder.parameters())


def _needs_gradient(module: nn.Module) -> bool:
    return torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters())


def _balanced_shards(lengths: torch.Tensor, n_shards: int) -> List[torch.Tensor]:
    """Row indices of ``n_shards`` shards with near-equal tokens (longest first, greedy)."""
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
    """The distinct inputs of batch rows ``rows`` only (a shard's own input products)."""
    index = distinct.index[rows]
    mask = length_mask(lengths[rows], index.shape[1])
    used, inverse = torch.unique(index[mask], return_inverse=True)
    shard_index = index.new_zeros(index.shape)
    shard_index[mask] = inverse
    return DistinctInputs(distinct.rows[used], shard_index)


def _gather_shards(pieces: List[DirectionOutputs], order: torch.Tensor) -> DirectionOutputs:
    """One direction's per-shard outputs and final states -> the batch's, rows in batch order."""
    n_layers = len(pieces[0][0])
    outputs = [torch.cat([p[0][i] for p in pieces]).index_select(0, order) for i in range(n_layers)]
    states = [
        tuple(torch.cat([p[1][i][part] for p in pieces]).index_select(0, order) for part in (0, 1))
        for i in range(n_layers)
    ]
    return outputs, states
