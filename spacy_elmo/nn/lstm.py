"""LSTM with a projected hidden state and optional cell/projection clipping (the ELMo cell).

The recurrence is written once (``cell_equations``) in torch's gate order; without clipping the
layer is ``torch.nn.LSTM(proj_size=...)`` with torch's parameter names. The one loop over the steps
is ``nn/lstm_kernels.py``'s, the one hand-written backward ``nn/lstm_training.py``'s; the two
directions run through ``nn/directions.py``.
"""

from __future__ import annotations

import functools
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from . import lstm_kernels
from .int8 import int8_wanted
from .lstm_kernels import DirectionOutputs, DistinctInputs, LSTMState
from .lstm_training import packed_training_loop
from .precision import compiling
from .side_by_side import side_stream

__all__ = [
    "ClippedLSTM", "DirectionalLSTM", "DirectionOutputs", "DistinctInputs", "LSTMState", "cell_equations",
    "dropout_masks", "length_mask", "reverse_padded",
]


class ClippedLSTM(nn.LSTM):
    """One unidirectional layer: the parameters, the clip settings (None: no clipping) and the cell
    equation. ``hidden_size`` is ELMo's ``dim``, ``proj_size`` its ``projection_dim``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        proj_size: int,
        cell_clip: Optional[float] = None,
        proj_clip: Optional[float] = None,
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers=1, proj_size=proj_size)
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip

    @property
    def clipped(self) -> bool:
        return self.cell_clip is not None or self.proj_clip is not None

    def cell(self, fused: bool = False) -> Callable[..., tuple]:
        """The layer's cell update, ``cell_equations`` with its sizes and clip: (gates (rows, 4 *
        hidden_size) in torch's order i, f, g, o, the previous cell state or None for zeros[,
        activations=True]) -> ``(sigmoid(o) * tanh(c_new), c_new)`` [and what the training loop's
        derivative reads]; ``fused``: compiled (one kernel each way; eager inside
        ``torch.compile``)."""
        equations = _fused_cell_equations() if fused and not compiling() else cell_equations
        return functools.partial(equations, hidden=self.hidden_size, cell_clip=self.cell_clip)

    def clip_output(self, h: torch.Tensor) -> torch.Tensor:
        """The projected output, clipped to ``proj_clip``."""
        return h if self.proj_clip is None else h.clamp(-self.proj_clip, self.proj_clip)

    def _trains(self, data: torch.Tensor, state: Optional[LSTMState]) -> bool:
        """Whether the training loop takes this run: gradients wanted, float, outside
        ``torch.compile`` (which traces autograd through the loop instead)."""
        if not torch.is_grad_enabled() or not data.is_floating_point() or compiling():
            return False
        return any(t.requires_grad for t in (data, *self.parameters(), *(state or ())))

    def run_packed(
        self,
        data: Optional[torch.Tensor],
        batch_sizes: torch.Tensor,
        state: Optional[LSTMState],
        distinct: Optional[DistinctInputs] = None,
        fused_cell: bool = False,
    ) -> Tuple[torch.Tensor, LSTMState]:
        """Run over packed rows sorted by decreasing length: cuDNN for unclipped layers on CUDA, the
        training loop where gradients are wanted (``nn/lstm_training.py``), else the one loop on the
        float products, or on int8 weights inside ``int8_products`` (``fused_cell``: the cell
        compiled).

        Args:
            data: (n_tokens, input_size), time-major packed rows (PackedSequence.data), or None
                with ``distinct``.
            batch_sizes: (max_len,) CPU int64, rows still running at each step.
            state: (h0 (batch, proj_size), c0 (batch, hidden_size)) in sorted row order, or None.
            distinct: the distinct rows of ``data`` and each packed row's index into them: input
                products once per distinct row (not in the training loop).
        Returns:
            output (n_tokens, proj_size) packed like ``data``, and the final (h, c) of every row."""
        like = data if distinct is None else distinct.rows
        if not self.clipped and like.is_cuda:
            return lstm_kernels.fused_packed(self, _packed_rows(data, distinct), batch_sizes, state)
        if self._trains(like, state):
            return packed_training_loop(self, _packed_rows(data, distinct), batch_sizes.tolist(), state, fused_cell)
        if int8_wanted(self.weight_ih_l0, self.weight_hh_l0, self.weight_hr_l0):
            products = lstm_kernels.int8_weight_products(self)
            state = None if state is None else (state[0].float(), state[1].float())
        else:
            products = lstm_kernels.float_products(self)
        return lstm_kernels.packed_layer(self, products, data, batch_sizes.tolist(), state, distinct, fused_cell)

    def run_dense(
        self,
        x: torch.Tensor,
        valid: Optional[torch.Tensor],
        state: Optional[LSTMState] = None,
        fused_cell: bool = False,
    ) -> Tuple[torch.Tensor, LSTMState]:
        """Over padded rows with data-independent shapes: x (batch, T, input_size), valid (batch, T)
        bool (None: all valid) -> (batch, T, proj_size) outputs (zero at padding) and each row's
        final (h, c). All-valid rows (windows) go to cuDNN (unclipped, CUDA) or, outside
        ``torch.compile``, to ``run_packed`` (its training loop where gradients flow: each
        weight's gradient one product). ``fused_cell``: the cell compiled (``cell``)."""
        if valid is None and not self.clipped and x.is_cuda:
            return lstm_kernels.fused_dense(self, x, state)
        if valid is None and not compiling():
            # Time-major packed rows, every row every step.
            batch, steps, _ = x.shape
            data = x.transpose(0, 1).reshape(steps * batch, -1)
            output, final = self.run_packed(data, torch.full((steps,), batch), state, fused_cell=fused_cell)
            # Contiguous as the dense loop's: dropout draws its mask in memory order.
            return output.view(steps, batch, -1).transpose(0, 1).contiguous(), final
        return lstm_kernels.dense_layer(self, x, valid, state, fused_cell)


def _packed_rows(data: Optional[torch.Tensor], distinct: Optional[DistinctInputs]) -> torch.Tensor:
    """``data``, or the rows ``distinct`` stands for."""
    return data if distinct is None else distinct.rows.index_select(0, distinct.index)


def cell_equations(
    gates: torch.Tensor,
    c: Optional[torch.Tensor],
    hidden: int,
    cell_clip: Optional[float],
    activations: bool = False,
) -> tuple:
    """``ClippedLSTM.cell``'s equations, the one copy: gates (rows, 4 * hidden) (i, f, g, o) ->
    (output before the projection, clipped new cell state[, the activations the derivative
    reads])."""
    # One split (its backward is one concatenation; a narrow's backward fills a gates-sized
    # tensor with zeros, four of them a step where gradients flow).
    input_forget, candidate, output = gates.split([2 * hidden, hidden, hidden], 1)
    i, f = torch.sigmoid(input_forget).split(hidden, 1)
    candidate = torch.tanh(candidate)
    c_new = i * candidate if c is None else torch.addcmul(f * c, i, candidate)
    if cell_clip is not None:
        c_new = c_new.clamp(-cell_clip, cell_clip)
    output, tanh_c = torch.sigmoid(output), torch.tanh(c_new)
    if activations:
        return output * tanh_c, c_new, (i, f, candidate, output, tanh_c)
    return output * tanh_c, c_new


_FUSED: List = []


def _fused_cell_equations():
    """``cell_equations`` under ``torch.compile``, made once per process; static shapes (a window
    step's are fixed): with dynamic ones, a layer of another size and clip that wants gradients
    after one without got wrong numbers (torch 2.13, ``tests/test_lstm.py``)."""
    if not _FUSED:
        _FUSED.append(torch.compile(cell_equations, fullgraph=True, dynamic=False))
    return _FUSED[0]


class DirectionalLSTM(nn.Module):
    """A stack of ClippedLSTM layers reading rows in the order given (the backward direction's rows
    come reversed: ``nn/directions.py``); from the second layer on, input is added to output when
    ``use_skip_connections`` (not fed back into the recurrence)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        proj_size: int,
        num_layers: int,
        cell_clip: Optional[float] = None,
        proj_clip: Optional[float] = None,
        use_skip_connections: bool = True,
    ) -> None:
        super().__init__()
        self.use_skip_connections = use_skip_connections
        self.hidden_size = hidden_size
        self.proj_size = proj_size
        self.layers = nn.ModuleList(
            ClippedLSTM(
                input_size if i == 0 else proj_size, hidden_size, proj_size, cell_clip, proj_clip
            )
            for i in range(num_layers)
        )

    def forward(
        self,
        inputs: Union[torch.Tensor, DistinctInputs],
        lengths: Optional[torch.Tensor] = None,
        states: Optional[Sequence[LSTMState]] = None,
        masks: Optional[Sequence[torch.Tensor]] = None,
        *,
        fixed_shapes: bool = False,
        wavefront: bool = False,
        fused_cell: bool = False,
    ) -> DirectionOutputs:
        """All layers over rows in reading order.

        Args:
            inputs: (batch, T, input_size); or the distinct rows and each position's (batch, T)
                index into them (their input products made once, where no mask applies).
            lengths: (batch,) int64, each row's positions (at least 1), padding after them; None:
                every position (windows of running text).
            states: per layer (h0, c0), or None for zeros.
            masks: per layer the scaled dropout mask of its input (batch, T, width)
                (``dropout_masks``), or None.
            fixed_shapes: shapes and work that do not depend on ``lengths``, nothing read back to
                the host (CUDA graphs): every row runs every step, ended rows frozen.
            wavefront: windows: the layers step by step (``lstm_kernels.wavefront_loop``; on CUDA
                each layer on a stream of its own), for clipped layers or off CUDA.
            fused_cell: the cell compiled (``ClippedLSTM.cell``).
        Returns:
            per layer (batch, T, proj_size) outputs (zero past each row's length), and per layer
            the final (h, c)."""
        if lengths is not None and not fixed_shapes:
            return self._packed(inputs, lengths, states, masks, fused_cell)
        x = inputs if isinstance(inputs, torch.Tensor) else inputs.rows[inputs.index]
        if wavefront and lengths is None and (self.layers[0].clipped or not x.is_cuda):
            return self._wavefront(x, states, masks, fused_cell)
        valid = None if lengths is None else length_mask(lengths, x.shape[1])
        outputs: List[torch.Tensor] = []
        final_states: List[LSTMState] = []
        for i, layer in enumerate(self.layers):
            layer_input = x if masks is None else x * masks[i]
            y, state = layer.run_dense(layer_input, valid, None if states is None else states[i], fused_cell)
            x = y + x if i > 0 and self.use_skip_connections else y
            outputs.append(x)
            final_states.append(state)
        return outputs, final_states

    def _packed(
        self,
        inputs: Union[torch.Tensor, DistinctInputs],
        lengths: torch.Tensor,
        states: Optional[Sequence[LSTMState]],
        masks: Optional[Sequence[torch.Tensor]],
        fused_cell: bool,
    ) -> DirectionOutputs:
        """``forward`` over packed rows, sorted by length (rows end as they end)."""
        lengths_cpu = lengths.cpu()
        width = (inputs if isinstance(inputs, torch.Tensor) else inputs.index).shape[1]

        def pack(t: torch.Tensor) -> PackedSequence:
            return nn.utils.rnn.pack_padded_sequence(t, lengths_cpu, batch_first=True, enforce_sorted=False)

        distinct = None
        if isinstance(inputs, DistinctInputs) and masks is None:
            packed = pack(inputs.index)
            distinct, x = DistinctInputs(inputs.rows, packed.data), None
        else:
            packed = pack(inputs if isinstance(inputs, torch.Tensor) else inputs.rows[inputs.index])
            x = packed.data
        sorted_idx, unsorted_idx = packed.sorted_indices, packed.unsorted_indices
        outputs: List[torch.Tensor] = []
        final_states: List[LSTMState] = []
        for i, layer in enumerate(self.layers):
            layer_input = x if masks is None else x * pack(masks[i]).data
            state = None
            if states is not None:
                state = tuple(part.index_select(0, sorted_idx) for part in states[i])
            y, (h_n, c_n) = layer.run_packed(
                layer_input, packed.batch_sizes, state, distinct if i == 0 else None, fused_cell
            )
            x = y + x if i > 0 and self.use_skip_connections else y
            final_states.append((h_n.index_select(0, unsorted_idx), c_n.index_select(0, unsorted_idx)))
            padded, _ = nn.utils.rnn.pad_packed_sequence(
                PackedSequence(x, packed.batch_sizes, sorted_idx, unsorted_idx),
                batch_first=True,
                total_length=width,
            )
            outputs.append(padded)
        return outputs, final_states

    def _wavefront(
        self,
        inputs: torch.Tensor,
        states: Optional[Sequence[LSTMState]],
        masks: Optional[Sequence[torch.Tensor]],
        fused_cell: bool,
    ) -> DirectionOutputs:
        """``forward`` on ``lstm_kernels.wavefront_loop`` (CUDA: a stream per layer)."""
        streams = None
        if inputs.is_cuda and not compiling():
            main = torch.cuda.current_stream(inputs.device)
            streams = [main] + [side_stream(inputs.device, ("layer", id(self), i)) for i in range(1, len(self.layers))]
            for stream in streams[1:]:
                stream.wait_stream(main)
        outputs, finals = lstm_kernels.wavefront_loop(
            self.layers, inputs, states, masks, self.use_skip_connections, streams, fused_cell
        )
        if streams is not None:
            for stream in streams[1:]:
                main.wait_stream(stream)
        return outputs, finals


def dropout_masks(lstm: DirectionalLSTM, rows: int, steps: int, p: float, like: torch.Tensor) -> List[torch.Tensor]:
    """The scaled input dropout masks (rows, steps, width) of each of ``lstm``'s layers (bilm-tf's
    LSTM input dropout), what ``DirectionalLSTM.forward`` multiplies by; ``like``: dtype, device."""
    sizes = [layer.input_size for layer in lstm.layers]
    return [like.new_empty((rows, steps, size)).bernoulli_(1.0 - p).div_(1.0 - p) for size in sizes]


def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(batch,) lengths -> (batch, width) bool, True at the first ``lengths[i]`` positions."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row of (batch, max_len, ...) within its length; padding stays in place."""
    max_len = x.shape[1]
    positions = torch.arange(max_len, device=x.device).expand(x.shape[0], max_len)
    lengths = lengths.to(x.device)[:, None]
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)
    return x.gather(1, index.view(*index.shape, *[1] * (x.dim() - 2)).expand_as(x))
