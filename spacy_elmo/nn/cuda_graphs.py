"""CUDA graphs for the biLM's two LSTM stacks at inference: on a GPU the LSTM loop is bound by
launching its many small kernels, which a graph replays back to back. Graphs replay fixed shapes and
addresses: the directions with ``fixed_shapes`` (``nn/directions.py``) on bucket-shaped static
buffers (``bucket_rows``), at most ``MAX_ROWS``
rows and ``MAX_GRAPHS`` graphs, recorded again when weights move or the precision changes; outputs
copied out under the lock. docs/results/implementation.md gives the figures.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Optional, Tuple

import torch

from .directions import LSTMRun, run_directions
from .lstm import DirectionalLSTM, DirectionOutputs, reverse_padded
from .precision import precision_context

#: Batches of more rows run the eager loop: graphs run every row to the bucket's last step, and
#: at large batches the GPU's work, not the launches, sets the pace, so the graphs lose there
#: (measured on an H100: docs/results/implementation.md, docs/bench/gpu/).
MAX_ROWS = 128
#: Graphs kept per biLM (a pipe meets a few batch shapes; each graph holds its output buffers).
MAX_GRAPHS = 16
#: Sequence lengths are rounded up to a multiple of this (steps on padding cost a little).
LENGTH_STEP = 8


def bucket_rows(n: int) -> int:
    """The batch size a graph is recorded for: ``n`` rounded up to 8 or the next of 2^k and
    1.5 * 2^k, so that at most a third of the rows is padding and a pipe meets few shapes."""
    size = 8
    while size < n:
        size = size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    return size


def pays_off(rows: int) -> bool:
    """Whether a batch of ``rows`` rows runs faster as a graph (``MAX_ROWS``)."""
    return bucket_rows(rows) <= MAX_ROWS


def bucket_length(n: int) -> int:
    return -(-n // LENGTH_STEP) * LENGTH_STEP


class _Recorded:
    """One graph: its static inputs, the outputs it writes, and the graph."""

    def __init__(self, tokens: torch.Tensor, lengths: torch.Tensor) -> None:
        self.tokens = tokens
        self.lengths = lengths
        self.graph = torch.cuda.CUDAGraph()
        self.outputs: Tuple[DirectionOutputs, DirectionOutputs] = ([], []), ([], [])


class LSTMGraphs:
    """The CUDA graphs of one biLM's forward and backward stacks (see the module docstring)."""

    def __init__(self, forward_lstm: DirectionalLSTM, backward_lstm: DirectionalLSTM) -> None:
        self.forward_lstm = forward_lstm
        self.backward_lstm = backward_lstm
        self._graphs: "OrderedDict[tuple, _Recorded]" = OrderedDict()
        self._weights_key: Optional[tuple] = None
        self._pool = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._graphs)

    def run(
        self, tokens: torch.Tensor, lengths: torch.Tensor, precision: str
    ) -> Tuple[DirectionOutputs, DirectionOutputs]:
        """Both stacks from zero states over padded ``tokens`` (batch, T, dim), each direction's
        outputs in its reading order (as ``BiLM.run_directions``)."""
        batch, steps, dim = tokens.shape
        rows, length = bucket_rows(batch), bucket_length(steps)
        key = (rows, length, dim, tokens.dtype, tokens.device, precision)
        with self._lock:
            self._drop_stale(tokens.device)
            recorded = self._graphs.get(key)
            if recorded is None:
                recorded = self._record(key, tokens, precision)
            self._graphs.move_to_end(key)
            recorded.tokens.zero_()
            recorded.tokens[:batch, :steps].copy_(tokens)
            recorded.lengths.zero_()
            recorded.lengths[:batch].copy_(lengths)
            recorded.graph.replay()
            return tuple(_cut(direction, batch, steps) for direction in recorded.outputs)

    def _drop_stale(self, device: torch.device) -> None:
        """Forget every graph once a weight is another tensor (graphs read recorded addresses)."""
        key = tuple(
            (p.data_ptr(), p.dtype, p.device)
            for lstm in (self.forward_lstm, self.backward_lstm)
            for p in lstm.parameters()
        )
        if key != self._weights_key:
            self._graphs.clear()
            self._pool = torch.cuda.graph_pool_handle()
            self._weights_key = key

    def _record(self, key: tuple, like: torch.Tensor, precision: str) -> _Recorded:
        rows, length, dim = key[:3]
        recorded = _Recorded(
            like.new_zeros((rows, length, dim)), torch.zeros(rows, dtype=torch.long, device=like.device)
        )
        # Autocast's weight cache would hold casts made while recording; a graph must own them.
        mode = precision_context(precision, like.device, weight_cache=False)
        warmup = torch.cuda.Stream(like.device)
        warmup.wait_stream(torch.cuda.current_stream(like.device))
        with mode, torch.cuda.stream(warmup):
            self._both(recorded)  # cuBLAS handles and workspaces exist before recording
        torch.cuda.current_stream(like.device).wait_stream(warmup)
        mode = precision_context(precision, like.device, weight_cache=False)
        with mode, torch.cuda.graph(recorded.graph, pool=self._pool, capture_error_mode="thread_local"):
            recorded.outputs = self._both(recorded)
        self._graphs[key] = recorded
        while len(self._graphs) > MAX_GRAPHS:
            self._graphs.popitem(last=False)
        return recorded

    def _both(self, recorded: _Recorded) -> Tuple[DirectionOutputs, DirectionOutputs]:
        """The forward stack on the current stream, the backward one on a side stream, joined."""
        tokens, lengths = recorded.tokens, recorded.lengths
        rows, steps = tokens.shape[:2]
        index = torch.arange(rows * steps, device=tokens.device).view(rows, steps)
        reading = torch.stack([index, reverse_padded(index, lengths)])
        run = LSTMRun("streams", fixed_shapes=True)
        return run_directions((self.forward_lstm, self.backward_lstm), tokens.flatten(0, 1), reading, lengths, run=run)


def _cut(direction: DirectionOutputs, batch: int, steps: int) -> DirectionOutputs:
    """Copies of a graph's outputs for the caller's rows and steps (the next replay overwrites)."""
    outputs, states = direction
    return (
        [y[:batch, :steps].clone() for y in outputs],
        [(h[:batch].clone(), c[:batch].clone()) for h, c in states],
    )
