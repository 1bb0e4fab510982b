"""LSTM with a projected hidden state and optional cell/projection clipping (the ELMo cell).

Per time step, in torch's gate order (i, f, g, o)::

    gates = x W_ih^T + h W_hh^T + b_ih + b_hh
    c = clip(sigmoid(f) * c + sigmoid(i) * tanh(g), cell_clip)
    h = clip((sigmoid(o) * tanh(c)) W_hr^T, proj_clip)

Without clipping this is exactly ``torch.nn.LSTM(proj_size=...)``, so the layer *is* one: the
parameters carry torch's names (``weight_ih_l0``, ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``,
``weight_hr_l0``) and unclipped layers on GPU run cuDNN. Otherwise (clipping, which cuDNN lacks,
or the CPU, where torch's packed LSTM backward zero-fills a full gradient per time step) the layer
runs its own loop, exact in float32:

- the input products of all time steps in one matrix product (in the first layer, once per
  distinct token of the batch), split once into time steps (whose backward is one concatenation);
- a loop over time that touches only the sequences still running (packed, length-sorted rows), so
  padding costs nothing, with states kept feature-major so that each step's products are
  tall-skinny ``W @ h`` (about twice as fast on CPU BLAS as ``h @ W^T`` for a few rows);
- from a zero state, no recurrent product at the first step.

Under the "int8" precision (``nn/int8.py``) and without gradients, the layer runs a third loop:
row-major states, the input products of all time steps at once and each step's recurrent and
projection products on int8 weights; cell states and outputs float32.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from .int8 import Int8Weight, int8_wanted

LSTMState = Tuple[torch.Tensor, torch.Tensor]


class DistinctInputs(NamedTuple):
    """Inputs that repeat, stored once: ``rows`` (n_distinct, input_size) and ``index``, for each
    input position, the row holding its vector."""

    rows: torch.Tensor
    index: torch.Tensor


class ClippedLSTM(nn.LSTM):
    """One unidirectional layer over packed, length-sorted input.

    Args:
        input_size: width of the input vectors.
        hidden_size: width of the memory cell (ELMo's ``dim``).
        proj_size: width of the projected output/recurrent state (ELMo's ``projection_dim``).
        cell_clip / proj_clip: clip values, or None for no clipping.
    """

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

    def run_packed(
        self,
        data: torch.Tensor,
        batch_sizes: torch.Tensor,
        state: Optional[LSTMState],
        distinct: Optional[DistinctInputs] = None,
    ) -> Tuple[torch.Tensor, LSTMState]:
        """Run over packed input whose rows are sorted by decreasing length.

        Args:
            data: (n_tokens, input_size), time-major packed rows (PackedSequence.data).
            batch_sizes: (max_len,) CPU int64, rows still running at each step.
            state: (h0 (batch, proj_size), c0 (batch, hidden_size)) in sorted row order, or None
                for zeros (the first step then skips its recurrent product, which is zero).
            distinct: the distinct rows of ``data`` and, per packed row, the index of its distinct
                row: the input products are then computed once per distinct row (exact).
        Returns:
            output (n_tokens, proj_size) packed like ``data``, and the final (h, c) of every row.
        """
        if not self.clipped and data.is_cuda:
            if state is None:
                state = _zeros(self, int(batch_sizes[0]), data)
            packed = PackedSequence(data, batch_sizes)
            output, (h_n, c_n) = super().forward(packed, (state[0][None], state[1][None]))
            return output.data, (h_n[0], c_n[0])
        if int8_wanted(self.weight_ih_l0, self.weight_hh_l0, self.weight_hr_l0):
            if distinct is not None:
                data = distinct.rows.index_select(0, distinct.index)
            return self._run_int8_loop(data, batch_sizes.tolist(), state)
        if distinct is None:
            x_gates = self._input_gates(data)
        else:
            x_gates = self._input_gates(distinct.rows).index_select(1, distinct.index)
        return self._run_loop(x_gates, batch_sizes.tolist(), state)

    def _input_gates(self, x: torch.Tensor) -> torch.Tensor:
        """(n, input_size) -> feature-major (4 * hidden_size, n): x W_ih^T + b_ih + b_hh."""
        bias = (self.bias_ih_l0 + self.bias_hh_l0)[:, None]
        return torch.addmm(bias, self.weight_ih_l0, x.t())

    def _run_loop(
        self, x_gates: torch.Tensor, batch_sizes: List[int], state: Optional[LSTMState]
    ) -> Tuple[torch.Tensor, LSTMState]:
        """The loop keeps states and gates feature-major, (features, rows): the recurrent product
        becomes ``W_hh @ h^T``, a tall-skinny matrix product that BLAS runs about twice as fast
        as ``h @ W_hh^T`` for the few rows of one time step (and more as rows finish)."""
        hidden = self.hidden_size
        w_hh, w_hr = self.weight_hh_l0, self.weight_hr_l0
        steps = x_gates.split(batch_sizes, dim=1)
        if state is None:
            # Zero state: the first step's gates are its input products alone.
            h, c = _zeros(self, batch_sizes[0], x_gates)
            h, c = h.t(), c.t()
            gates = steps[0]
        else:
            h, c = state[0].t(), state[1].t()
            gates = None
        outputs: List[torch.Tensor] = []
        finished_h: List[torch.Tensor] = []
        finished_c: List[torch.Tensor] = []
        for step_gates in steps:
            n_running = step_gates.shape[1]
            if n_running < h.shape[1]:
                # The shortest rows (at the end, as rows are sorted) have ended: keep their state.
                finished_h.append(h[:, n_running:])
                finished_c.append(c[:, n_running:])
                h, c = h[:, :n_running], c[:, :n_running]
            if gates is None:
                gates = torch.addmm(step_gates, w_hh, h)
            c = self._clip_cell(_cell_update(gates, c, hidden))
            h = self._clip_output(w_hr.mm(torch.sigmoid(gates[3 * hidden :]) * torch.tanh(c)))
            outputs.append(h)
            gates = None
        finished_h.append(h)
        finished_c.append(c)
        h_n = torch.cat(finished_h[::-1], dim=1).t()
        c_n = torch.cat(finished_c[::-1], dim=1).t()
        return torch.cat(outputs, dim=1).t().contiguous(), (h_n, c_n)

    def _run_int8_loop(
        self, data: torch.Tensor, batch_sizes: List[int], state: Optional[LSTMState]
    ) -> Tuple[torch.Tensor, LSTMState]:
        """The loop on int8 weights (``nn/int8.py``): row-major (rows, features) states; each
        step's products are quantized inputs times per-channel int8 weights, which for the few
        rows of a step is bound by reading the weights, a quarter of the float32 bytes."""
        w_ih = Int8Weight.for_weight(self.weight_ih_l0, self, "_int8_ih")
        w_hh = Int8Weight.for_weight(self.weight_hh_l0, self, "_int8_hh")
        w_hr = Int8Weight.for_weight(self.weight_hr_l0, self, "_int8_hr")
        x_gates = w_ih(data, (self.bias_ih_l0 + self.bias_hh_l0).float())
        h, c = (None, None) if state is None else (state[0].float(), state[1].float())
        outputs: List[torch.Tensor] = []
        finished_h: List[torch.Tensor] = []
        finished_c: List[torch.Tensor] = []
        start = 0
        for n_running in batch_sizes:
            rows = slice(start, start + n_running)
            start += n_running
            gates = x_gates[rows]
            if h is not None:
                if n_running < h.shape[0]:
                    finished_h.append(h[n_running:])
                    finished_c.append(c[n_running:])
                    h, c = h[:n_running], c[:n_running]
                gates += w_hh(h)
            i, f, g, o = gates.chunk(4, dim=1)
            candidate = torch.sigmoid(i) * torch.tanh(g)
            c = self._clip_cell(candidate if c is None else candidate.addcmul_(torch.sigmoid(f), c))
            h = self._clip_output(w_hr(torch.sigmoid(o) * torch.tanh(c)))
            outputs.append(h)
        finished_h.append(h)
        finished_c.append(c)
        return torch.cat(outputs), (torch.cat(finished_h[::-1]), torch.cat(finished_c[::-1]))

    def run_dense(self, x: torch.Tensor, valid: torch.Tensor) -> Tuple[torch.Tensor, LSTMState]:
        """Over padded rows from zero states, with shapes that never depend on the data: every row
        runs every step, and a row's state stops changing after its last valid step. The products
        of ``_run_loop`` on all rows at once, for CUDA graphs (``nn/cuda_graphs.py``), whose
        replays need static shapes and no reads back to the CPU.

        Args:
            x: (batch, T, input_size), each row in reading order, padding after its tokens.
            valid: (batch, T) bool, True at each row's tokens.
        Returns:
            (batch, T, proj_size) outputs (zero at padding) and each row's final (h, c).
        """
        batch, steps, _ = x.shape
        hidden = self.hidden_size
        bias = self.bias_ih_l0 + self.bias_hh_l0
        x_gates = torch.addmm(bias, x.reshape(batch * steps, -1), self.weight_ih_l0.t())
        x_gates = x_gates.view(batch, steps, 4 * hidden)
        h, c = _zeros(self, batch, x_gates)
        w_hh, w_hr = self.weight_hh_l0.t(), self.weight_hr_l0.t()
        outputs: List[torch.Tensor] = []
        for t in range(steps):
            i, f, g, o = torch.addmm(x_gates[:, t], h, w_hh).chunk(4, dim=1)
            c_new = self._clip_cell(torch.addcmul(torch.sigmoid(f) * c, torch.sigmoid(i), torch.tanh(g)))
            h_new = self._clip_output((torch.sigmoid(o) * torch.tanh(c_new)).mm(w_hr))
            keep = valid[:, t, None]
            c = torch.where(keep, c_new, c)
            h = torch.where(keep, h_new, h)
            outputs.append(h_new * keep)
        return torch.stack(outputs, dim=1), (h, c)

    def _clip_cell(self, c: torch.Tensor) -> torch.Tensor:
        return c if self.cell_clip is None else c.clamp(-self.cell_clip, self.cell_clip)

    def _clip_output(self, h: torch.Tensor) -> torch.Tensor:
        return h if self.proj_clip is None else h.clamp(-self.proj_clip, self.proj_clip)


def _zeros(layer: ClippedLSTM, batch_size: int, like: torch.Tensor) -> LSTMState:
    """Zero (h, c) for ``batch_size`` rows, at least float32 (under autocast the cell state stays
    float32 while the products run in bf16)."""
    dtype = torch.promote_types(like.dtype, torch.float32)
    return (
        like.new_zeros(batch_size, layer.proj_size, dtype=dtype),
        like.new_zeros(batch_size, layer.hidden_size, dtype=dtype),
    )


def _cell_update(gates: torch.Tensor, c: torch.Tensor, hidden: int) -> torch.Tensor:
    """c_new = sigmoid(f) * c + sigmoid(i) * tanh(g), feature-major gates in (i, f, g, o) order."""
    input_forget = torch.sigmoid(gates[: 2 * hidden])
    candidate = torch.tanh(gates[2 * hidden : 3 * hidden])
    return torch.addcmul(input_forget[hidden:] * c, input_forget[:hidden], candidate)


class DirectionalLSTM(nn.Module):
    """A stack of ClippedLSTM layers reading sentences in one direction.

    Layers from the second on add their input to their output (residual connection) when
    ``use_skip_connections``; the residual is not fed back into the recurrence. The backward
    direction (``go_forward=False``) reads each row from its last real token to its first.
    """

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
    ) -> Tuple[List[torch.Tensor], List[LSTMState]]:
        """Run all layers.

        Args:
            inputs: (batch, max_len, input_size), rows padded after their ``lengths``.
            lengths: (batch,) int64, every length >= 1.
            states: per layer (h0, c0) in batch order, or None for zeros.
            dropout: applied to each layer's input while training (bilm-tf's LSTM input dropout).
            distinct: ``inputs`` as distinct rows and a (batch, max_len) index into them (tokens
                repeat within a batch): the first layer then computes its input products once
                per distinct token. Ignored while input dropout applies.
        Returns:
            per layer, (batch, max_len, proj_size) outputs in reading order of the original
            positions (padding rows zero), and per layer the final (h, c) in batch order.
        """
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
            layer_input = nn.functional.dropout(x, dropout, self.training) if dropout else x
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
        """``forward`` from zero states without dropout, every layer on ``ClippedLSTM.run_dense``:
        no packing and no reads back to the CPU, so that a CUDA graph can hold it. ``valid``:
        (batch, max_len) bool, ``length_mask`` of ``lengths`` (rows of length 0 stay zero)."""
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
