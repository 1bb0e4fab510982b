"""How a BiLM is run: ``BiLMRunner(bilm)(char_ids)`` returns ``bilm(char_ids)`` in float32, in its
``precision``, as CUDA graphs, side by side on ``threads``, with a token cache, or eagerly; where
gradients flow only the precision applies. What the pipe runs. docs/guide/pytorch.md
and docs/guide/speed.md.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn

from .bilm import BiLM, BiLMStates, DirectionOutputs, scatter_tokens
from .cuda_graphs import LSTMGraphs, pays_off
from .directions import LSTMRun, run_directions
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

    def _graphed(self, index: torch.Tensor, states: Optional[BiLMStates]) -> bool:
        """Whether the LSTM stacks run as CUDA graphs in this call: CUDA, a batch small enough, no
        gradient, zero states, not inside the caller's own recording."""
        return (
            self.cuda_graphs
            and index.device.type == "cuda"
            and pays_off(index.shape[1])
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
        self, rows: torch.Tensor, index: torch.Tensor, lengths: torch.Tensor, states: Optional[BiLMStates]
    ) -> Tuple[DirectionOutputs, DirectionOutputs]:
        """``BiLM.run_directions`` as graphs, or on ``threads``: ``threads // 2`` shards of rows
        balanced by tokens, times the two directions (``nn/directions.py``)."""
        if self._graphed(index, states):
            tokens = scatter_tokens(DistinctInputs(rows, index[0]), length_mask(lengths, index.shape[2]))
            return self._lstm_graphs().run(tokens, lengths, self.precision)
        if not self._side_by_side(rows.device):
            return self.bilm.run_directions(rows, index, lengths, states)
        precision = self.precision
        run = LSTMRun("threads", shards=max(1, self.threads // 2), context=lambda: precision_context(precision, rows.device))
        with torch.no_grad():
            return run_directions((self.bilm.forward_lstm, self.bilm.backward_lstm), rows, index, lengths, states, run=run)

    def _lstm_graphs(self) -> LSTMGraphs:
        if self._graphs is None:
            self._graphs = LSTMGraphs(self.bilm.forward_lstm, self.bilm.backward_lstm)
        return self._graphs

    def _on_threads(self, runs: List[Callable[[torch.Tensor], Any]], x: torch.Tensor) -> List[Any]:
        """``[run(x) for run in runs]`` on threads, without gradients, each in the precision."""
        precision = self.precision
        with torch.no_grad():
            return run_side_by_side_of(runs, x, "threads", context=lambda: precision_context(precision, x.device))

    def _token_cache_state(self) -> tuple:
        """What cached token vectors depend on: the precision and the encoder's weights."""
        return self.precision, weights_key(self.bilm.token_encoder.parameters())


def _needs_gradient(module: nn.Module) -> bool:
    return torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters())
