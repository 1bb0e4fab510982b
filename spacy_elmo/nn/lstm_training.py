"""One ``ClippedLSTM`` layer over packed rows as a single autograd node, its backward written out:
what a layer trains on, on the CPU. Autograd through the step loop records a dozen nodes a step;
here the forward keeps the cell's activations and the backward runs the recurrence in reverse, each
weight's gradient one product over all steps. Tested against autograd and numerical gradients
(``tests/test_lstm_training.py``).
"""

from __future__ import annotations

import functools
import itertools
from typing import List, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from .lstm_kernels import LSTMLayer, LSTMState


def packed_training_loop(
    layer: LSTMLayer,
    data: torch.Tensor,
    batch_sizes: List[int],
    state: Optional[LSTMState],
    fused_cell: bool = False,
) -> Tuple[torch.Tensor, LSTMState]:
    """``lstm_kernels.packed_loop`` for training: data (n_tokens, input_size) packed, rows by
    decreasing length -> packed (n_tokens, proj_size) outputs and each row's final (h, c);
    ``fused_cell``: the cell compiled."""
    h0, c0 = (None, None) if state is None else state
    output, h_n, c_n = _PackedLayer.apply(
        data, h0, c0, layer.weight_ih_l0, layer.bias_ih_l0, layer.bias_hh_l0, layer.weight_hh_l0,
        layer.weight_hr_l0, batch_sizes, functools.partial(layer.cell, fused=fused_cell), layer.cell_clip,
        layer.proj_clip,
    )  # fmt: skip
    return output, (h_n, c_n)


class _PackedLayer(torch.autograd.Function):
    """forward(x, h0, c0, w_ih, b_ih, b_hh, w_hh, w_hr, batch_sizes, cell, cell_clip, proj_clip) ->
    (outputs (n, proj), h_n, c_n); h0, c0 None: zeros, no first recurrent product."""

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, b_ih, b_hh, w_hh, w_hr, batch_sizes, cell, cell_clip, proj_clip):
        ctx.set_materialize_grads(False)
        n = x.shape[0]
        # The gates of every step (the recurrent product added in place, step by step).
        gates = torch.addmm(b_ih + b_hh, x, w_ih.t())
        outputs = x.new_empty(n, w_hr.shape[0])
        output_kept = None if proj_clip is None else x.new_empty(outputs.shape, dtype=torch.bool)
        w_hh_t, w_hr_t = w_hh.t(), w_hr.t()
        starts = list(itertools.accumulate(batch_sizes[:-1], initial=0))  # each step's first row
        # Per step: the cell's activations (i, f, g, o, tanh(c)), its new state and its output.
        steps: List[tuple] = []
        cells: List[torch.Tensor] = []
        hiddens: List[torch.Tensor] = []
        h, c = h0, c0
        for start, b in zip(starts, batch_sizes):
            end = start + b
            a = gates[start:end]
            if h is not None:
                a.addmm_(h[:b], w_hh_t)
            hidden_t, c_new, activations = cell(a, None if c is None else c[:b], 1, activations=True)
            h_new = torch.mm(hidden_t, w_hr_t, out=outputs[start:end])
            if output_kept is not None:
                torch.le(h_new.abs(), proj_clip, out=output_kept[start:end])
                h_new.clamp_(-proj_clip, proj_clip)
            steps.append(activations)
            cells.append(c_new)
            hiddens.append(hidden_t)
            h, c = h_new, c_new
        last = torch.tensor(_last_positions(batch_sizes, starts), dtype=torch.long, device=x.device)
        ctx.save_for_backward(x, h0, c0, w_ih, w_hh, w_hr, outputs, output_kept, last)
        ctx.steps, ctx.cells, ctx.hiddens = steps, cells, hiddens
        ctx.batch_sizes, ctx.starts, ctx.cell_clip = batch_sizes, starts, cell_clip
        c_n = torch.cat(cells).index_select(0, last)
        return outputs, outputs.index_select(0, last), c_n

    @staticmethod
    @once_differentiable
    def backward(ctx, d_outputs, d_h_n, d_c_n):
        x, h0, c0, w_ih, w_hh, w_hr, outputs, output_kept, last = ctx.saved_tensors
        steps, cells, hiddens = ctx.steps, ctx.cells, ctx.hiddens
        batch_sizes, starts, cell_clip = ctx.batch_sizes, ctx.starts, ctx.cell_clip
        hidden = cells[0].shape[1]
        one = outputs.new_ones(())
        # d loss / d h of every step: from above, then from the next step (added in place below).
        dh = torch.zeros_like(outputs) if d_outputs is None else d_outputs.clone(memory_format=torch.contiguous_format)
        if d_h_n is not None:
            dh.index_add_(0, last, d_h_n)
        d_gates = outputs.new_empty(outputs.shape[0], 4 * hidden)
        # d loss / d c of the step before, for its rows that this step still runs (the first)
        dc_next: Optional[torch.Tensor] = None
        for t in range(len(batch_sizes) - 1, -1, -1):
            start, b = starts[t], batch_sizes[t]
            end = start + b
            i, f, g, o, tanh_c = steps[t]
            hidden_t, dg = hiddens[t], d_gates[start:end]
            dh_t = dh[start:end]
            if output_kept is not None:
                dh_t.mul_(output_kept[start:end])
            d_hidden = torch.mm(dh_t, w_hr)
            # output gate: d_hidden tanh(c) o (1 - o) = d_hidden (hidden - hidden o)
            torch.mul(d_hidden, torch.addcmul(hidden_t, hidden_t, o, value=-1), out=dg[:, 3 * hidden :])
            # cell: d_hidden o (1 - tanh(c)^2) = d_hidden (o - hidden tanh(c)), plus the next step's
            dc = d_hidden.mul_(torch.addcmul(o, hidden_t, tanh_c, value=-1))
            if dc_next is not None:
                dc[: dc_next.shape[0]] += dc_next
            if d_c_n is not None:  # the rows whose last step this is
                ending = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0
                dc[ending:] += d_c_n[ending:b]
            if cell_clip is not None:  # the clip passes no gradient where it bit
                dc.mul_(cells[t].abs() < cell_clip)
            # input gate dc g i (1 - i); candidate dc i (1 - g^2); forget dc c' f (1 - f)
            torch.mul(dc, g, out=dg[:, :hidden]).mul_(torch.addcmul(i, i, i, value=-1))
            torch.mul(dc, i, out=dg[:, 2 * hidden : 3 * hidden]).mul_(torch.addcmul(one, g, g, value=-1))
            c_prev = (None if c0 is None else c0[:b]) if t == 0 else cells[t - 1][:b]
            if c_prev is None:
                dg[:, hidden : 2 * hidden].zero_()
            else:
                torch.mul(dc, c_prev, out=dg[:, hidden : 2 * hidden]).mul_(torch.addcmul(f, f, f, value=-1))
            dc_next = dc.mul_(f)
            if t > 0:
                dh[starts[t - 1] : starts[t - 1] + b].addmm_(dg, w_hh)
        first = batch_sizes[0]
        wanted = ctx.needs_input_grad
        d_x = torch.mm(d_gates, w_ih) if wanted[0] else None
        d_h0 = torch.mm(d_gates[:first], w_hh) if h0 is not None and wanted[1] else None
        d_c0 = dc_next if c0 is not None and wanted[2] else None
        d_w_ih = torch.mm(d_gates.t(), x) if wanted[3] else None
        d_bias = d_gates.sum(0) if wanted[4] or wanted[5] else None
        d_w_hh = None
        if wanted[6]:
            d_w_hh = torch.mm(d_gates[first:].t(), _previous_outputs(outputs, batch_sizes, starts))
            if h0 is not None:
                d_w_hh.addmm_(d_gates[:first].t(), h0)
        d_w_hr = torch.mm(dh.t(), torch.cat(hiddens)) if wanted[7] else None
        return d_x, d_h0, d_c0, d_w_ih, d_bias, d_bias, d_w_hh, d_w_hr, None, None, None, None


def _last_positions(batch_sizes: List[int], starts: List[int]) -> List[int]:
    """The packed position of each row's last step, rows in order."""
    positions: List[int] = []
    for t in range(len(batch_sizes) - 1, -1, -1):
        ending = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0
        positions.extend(range(starts[t] + ending, starts[t] + batch_sizes[t]))
    return positions


def _previous_outputs(outputs: torch.Tensor, batch_sizes: List[int], starts: List[int]) -> torch.Tensor:
    """Every step's recurrent input from the second on: the first rows of the step before."""
    if batch_sizes[-1] == batch_sizes[0]:
        return outputs[: starts[-1]]
    return torch.cat([outputs[starts[t - 1] : starts[t - 1] + batch_sizes[t]] for t in range(1, len(batch_sizes))])
