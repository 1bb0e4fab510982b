"""LSTM with a projected hidden state and optional cell/projection clipping (the ELMo cell).

The recurrence is written once (``cell_equations``) in torch's gate order; without clipping the
layer is ``torch.nn.LSTM(proj_size=...)`` with torch's parameter names. How the steps run is
``nn/lstm_kernels.py``'s business, training on the CPU ``nn/lstm_training.py``'s (the manual's
"Design", "One of each").
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

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
    "length_mask", "reverse_padded", "window_dropout_masks",
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

    def cell(
        self, gates: torch.Tensor, c: Optional[torch.Tensor], activations: bool = False, fused: bool = False
    ) -> tuple:
        """One step's cell update: ``gates`` (rows, 4 * hidden_size) in torch's order i, f, g, o,
        ``c`` the previous cell state or None for zeros. Returns ``(sigmoid(o) * tanh(c_new),
        c_new)`` and with ``activations`` also what the training loop's derivative reads;
        ``fused``: compiled (one kernel each way; eager inside ``torch.compile``)."""
        equations = _fused_cell_equations() if fused and not compiling() else cell_equations
        return equations(gates, c, self.hidden_size, self.cell_clip, activations)

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
        data: torch.Tensor,
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
            data: (n_tokens, input_size), time-major packed rows (PackedSequence.data).
            batch_sizes: (max_len,) CPU int64, rows still running at each step.
            state: (h0 (batch, proj_size), c0 (batch, hidden_size)) in sorted row order, or None.
            distinct: the distinct rows of ``data`` and each packed row's index into them: input
                products once per distinct row (not in the training loop).
        Returns:
            output (n_tokens, proj_size) packed like ``data``, and the final (h, c) of every row."""
        if not self.clipped and data.is_cuda:
            if distinct is not None:
                data = distinct.rows.index_select(0, distinct.index)
            return lstm_kernels.fused_packed(self, data, batch_sizes, state)
        if self._trains(data, state):
            if distinct is not None:
                data = distinct.rows.index_select(0, distinct.index)
            return packed_training_loop(self, data, batch_sizes.tolist(), state, fused_cell)
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
    """``cell_equations`` under ``torch.compile``, made once per process."""
    if not _FUSED:
        _FUSED.append(torch.compile(cell_equations, fullgraph=True))
    return _FUSED[0]


class DirectionalLSTM(nn.Module):
    """A stack of ClippedLSTM layers reading sentences in one direction; from the second layer on,
    input is added to output when ``use_skip_connections`` (not fed back into the recurrence)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        proj_size: int,
        num_layers: int,
        cell_clip: Optional[float] = None,
        proj_clip: Optional[float] = None,
        use_skip_connections: bool = True,
        go_forward: bool = True,
    ) -> None:
        super().__init__()
        self.go_forward = go_forward
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
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        states: Optional[List[LSTMState]] = None,
        dropout: float = 0.0,
        distinct: Optional[DistinctInputs] = None,
        generator: Optional[torch.Generator] = None,
    ) -> Tuple[List[torch.Tensor], List[LSTMState]]:
        """Run all layers.

        Args:
            inputs: (batch, max_len, input_size), rows padded after their ``lengths``.
            lengths: (batch,) int64, every length >= 1.
            states: per layer (h0, c0) in batch order, or None for zeros.
            dropout: on each layer's input while training (bilm-tf's LSTM input dropout).
            distinct: ``inputs`` as distinct rows and a (batch, max_len) index into them;
                ignored while dropout applies.
            generator: the dropout masks' source (default torch's); one per direction keeps them
                independent of which thread runs it.
        Returns:
            per layer (batch, max_len, proj_size) outputs in original positions (padding zero),
            and per layer the final (h, c) in batch order."""
        max_len = inputs.shape[1]
        lengths_cpu = lengths.cpu()
        if not self.go_forward:
            inputs = reverse_padded(inputs, lengths)
        packed = nn.utils.rnn.pack_padded_sequence(
            inputs, lengths_cpu, batch_first=True, enforce_sorted=False
        )
        sorted_idx, unsorted_idx = packed.sorted_indices, packed.unsorted_indices
        applies_dropout = dropout > 0 and self.training
        if distinct is not None and not applies_dropout:
            index = distinct.index
            if not self.go_forward:
                index = reverse_padded(index[:, :, None], lengths)[:, :, 0]
            packed_index = nn.utils.rnn.pack_padded_sequence(
                index, lengths_cpu, batch_first=True, enforce_sorted=False
            ).data
            distinct = DistinctInputs(distinct.rows, packed_index)
        else:
            distinct = None
        x = packed.data
        outputs: List[torch.Tensor] = []
        final_states: List[LSTMState] = []
        for i, layer in enumerate(self.layers):
            layer_input = _dropout(x, dropout, self.training, generator)
            state = None
            if states is not None:
                h0, c0 = states[i]
                state = (h0.index_select(0, sorted_idx), c0.index_select(0, sorted_idx))
            y, (h_n, c_n) = layer.run_packed(
                layer_input, packed.batch_sizes, state, distinct if i == 0 else None
            )
            if i > 0 and self.use_skip_connections:
                y = y + x
            x = y
            final_states.append((h_n.index_select(0, unsorted_idx), c_n.index_select(0, unsorted_idx)))
            padded, _ = nn.utils.rnn.pad_packed_sequence(
                PackedSequence(y, packed.batch_sizes, sorted_idx, unsorted_idx),
                batch_first=True,
                total_length=max_len,
            )
            outputs.append(padded if self.go_forward else reverse_padded(padded, lengths))
        return outputs, final_states

    def forward_dense(
        self, inputs: torch.Tensor, lengths: torch.Tensor, valid: torch.Tensor
    ) -> Tuple[List[torch.Tensor], List[LSTMState]]:
        """``forward`` from zero states without dropout on ``run_dense``, no reads back to the CPU
        (CUDA graphs); ``valid``: (batch, max_len) bool, ``length_mask(lengths)``."""
        x = inputs if self.go_forward else reverse_padded(inputs, lengths)
        outputs: List[torch.Tensor] = []
        final_states: List[LSTMState] = []
        for i, layer in enumerate(self.layers):
            y, state = layer.run_dense(x, valid)
            if i > 0 and self.use_skip_connections:
                y = y + x
            x = y
            final_states.append(state)
            outputs.append(y if self.go_forward else reverse_padded(y, lengths))
        return outputs, final_states

    def forward_windows(
        self,
        inputs: torch.Tensor,
        states: Optional[List[LSTMState]] = None,
        dropout: float = 0.0,
        masks: Optional[Sequence[torch.Tensor]] = None,
        *,
        wavefront: bool = False,
        fused_cell: bool = False,
    ) -> Tuple[torch.Tensor, List[LSTMState]]:
        """All layers over windows of running text (pretraining), each row in this direction's
        reading order, from ``states`` (per layer (h0, c0), or None); fixed shapes, no reads back to
        the host. Returns the top layer's (batch, T, proj_size) output and each layer's final (h,
        c). ``masks`` (``window_dropout_masks``) replace ``dropout`` where the directions run side
        by side and must not share a generator. ``wavefront``: on the wavefront loop
        (``lstm_kernels.wavefront_loop``; on CUDA each layer on a stream of its own); ``fused_cell``:
        the cell compiled (``ClippedLSTM.cell``)."""
        if wavefront and (self.layers[0].clipped or not inputs.is_cuda):
            return self._wavefront(inputs, states, dropout, masks, fused_cell)
        x = inputs
        final_states: List[LSTMState] = []
        for i, layer in enumerate(self.layers):
            layer_input = _dropout(x, dropout, self.training, None) if masks is None else x * masks[i]
            y, state = layer.run_dense(layer_input, None, None if states is None else states[i], fused_cell)
            if i > 0 and self.use_skip_connections:
                y = y + x
            x = y
            final_states.append(state)
        return x, final_states


    def _wavefront(
        self,
        inputs: torch.Tensor,
        states: Optional[List[LSTMState]],
        dropout: float,
        masks: Optional[Sequence[torch.Tensor]],
        fused_cell: bool,
    ) -> Tuple[torch.Tensor, List[LSTMState]]:
        """``forward_windows`` on ``lstm_kernels.wavefront_loop`` (CUDA: a stream per layer)."""
        if masks is None and dropout and self.training:
            rows, steps, width = inputs.shape
            masks = window_dropout_masks(self, rows, steps, width, dropout, inputs)
        streams = None
        if inputs.is_cuda and not compiling():
            main = torch.cuda.current_stream(inputs.device)
            streams = [main] + [
                side_stream(inputs.device, ("layer", self.go_forward, i)) for i in range(1, len(self.layers))
            ]
            for stream in streams[1:]:
                stream.wait_stream(main)
        top, finals = lstm_kernels.wavefront_loop(
            self.layers, inputs, states, masks, self.use_skip_connections, streams, fused_cell
        )
        if streams is not None:
            for stream in streams[1:]:
                main.wait_stream(stream)
        return top, finals


def window_dropout_masks(
    lstm: DirectionalLSTM, rows: int, steps: int, input_size: int, p: float, like: torch.Tensor
) -> List[torch.Tensor]:
    """The scaled input dropout masks of ``forward_windows``'s layers, drawn as it would."""
    sizes = [input_size] + [layer.input_size for layer in lstm.layers[1:]]
    return [
        like.new_empty((rows, steps, size)).bernoulli_(1.0 - p).div_(1.0 - p) for size in sizes
    ]


def _dropout(
    x: torch.Tensor, p: float, training: bool, generator: Optional[torch.Generator]
) -> torch.Tensor:
    """``nn.functional.dropout``, its mask drawn from ``generator`` when one is given."""
    if not p or not training:
        return x
    if generator is None:
        return nn.functional.dropout(x, p, training)
    keep = torch.empty_like(x).bernoulli_(1.0 - p, generator=generator)
    return x * keep.div_(1.0 - p)


def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(batch,) lengths -> (batch, width) bool, True at the first ``lengths[i]`` positions."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row of (batch, max_len, dim) within its length; padding stays in place."""
    max_len = x.shape[1]
    positions = torch.arange(max_len, device=x.device).expand(x.shape[0], max_len)
    lengths = lengths.to(x.device)[:, None]
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)
    return x.gather(1, index[:, :, None].expand_as(x))
