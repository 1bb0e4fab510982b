"""One ``ClippedLSTM`` layer over packed rows as a single autograd node, its backward written out:
what a layer trains on, on the CPU. Autograd through the step loop records a dozen nodes a step;
here the forward keeps the cell's activations and the backward runs the recurrence in reverse, each
weight's gradient one product over all steps. Tested against autograd and numerical gradients
(``tests/test_lstm_training.py``).
"""

from __future__ import annotations

import functools
import itertools
from typing import Callable, List, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from .lstm_kernels import LayerProducts, LSTMLayer, LSTMState, run_steps


def packed_training_loop(
    layer: LSTMLayer,
    data: torch.Tensor,
    batch_sizes: List[int],
    state: Optional[LSTMState],
    fused_cell: bool = False,
) -> Tuple[torch.Tensor, LSTMState]:
    """``lstm_kernels.packed_layer`` for training: data (n_tokens, input_size) packed, rows by
    decreasing length -> packed (n_tokens, proj_size) outputs and each row's final (h, c);
    ``fused_cell``: the cell compiled."""
    h0, c0 = (None, None) if state is None else state
    output, h_n, c_n = _PackedLayer.apply(
        data, h0, c0, layer.weight_ih_l0, layer.bias_ih_l0, layer.bias_hh_l0, layer.weight_hh_l0,
        layer.weight_hr_l0, batch_sizes, functools.partial(layer.cell, fused=fused_cell), layer.cell_clip,
        layer.proj_clip,
    )  # fmt: skip
    return output, (h_n, c_n)


class _Kept:
    """The products and the cell ``_PackedLayer``'s forward hands to the one loop: the recurrent
    product added in place to the step's gates, the outputs written into one packed tensor, and
    what the backward reads kept step by step (the cell's activations, its state, its output
    before the projection, and where the projection's clip let the gradient through)."""

    def __init__(self, outputs: torch.Tensor, cell: Callable, w_hh: torch.Tensor, w_hr: torch.Tensor,
                 proj_clip: Optional[float]) -> None:  # fmt: skip
        self.outputs, self.cell_equations, self.proj_clip = outputs, cell, proj_clip
        self.w_hh_t, self.w_hr_t = w_hh.t(), w_hr.t()
        self.output_kept = None if proj_clip is None else outputs.new_empty(outputs.shape, dtype=torch.bool)
        self.activations: List[tuple] = []
        self.cells: List[torch.Tensor] = []
        self.hiddens: List[torch.Tensor] = []
        self.written = 0
        self.products = LayerProducts(None, lambda gates, h: gates.addmm_(h, self.w_hh_t), self.project)

    def cell(self, gates: torch.Tensor, c: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        hidden, c_new, activations = self.cell_equations(gates, c, activations=True)
        self.activations.append(activations)
        self.cells.append(c_new)
        self.hiddens.append(hidden)
        return hidden, c_new

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        start, self.written = self.written, self.written + hidden.shape[0]
        h = torch.mm(hidden, self.w_hr_t, out=self.outputs[start : self.written])
        if self.output_kept is not None:
            torch.le(h.abs(), self.proj_clip, out=self.output_kept[start : self.written])
            h.clamp_(-self.proj_clip, self.proj_clip)
        return h


class _PackedLayer(torch.autograd.Function):
    """forward(x, h0, c0, w_ih, b_ih, b_hh, w_hh, w_hr, batch_sizes, cell, cell_clip, proj_clip) ->
    (outputs (n, proj), h_n, c_n); h0, c0 None: zeros, no first recurrent product."""

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, b_ih, b_hh, w_hh, w_hr, batch_sizes, cell, cell_clip, proj_clip):
        ctx.set_materialize_grads(False)
        kept = _Kept(x.new_empty(x.shape[0], w_hr.shape[0]), cell, w_hh, w_hr, proj_clip)
        # The gates of every step (the recurrent product added in place, step by step).
        steps = torch.addmm(b_ih + b_hh, x, w_ih.t()).split(batch_sizes)
        state = None if h0 is None else (h0, c0)
        _, (h_n, c_n) = run_steps(len(steps), steps.__getitem__, state, kept.products, kept.cell)
        ctx.save_for_backward(x, h0, c0, w_ih, w_hh, w_hr, kept.outputs, kept.output_kept)
        ctx.steps, ctx.cells, ctx.hiddens = kept.activations, kept.cells, kept.hiddens
        ctx.batch_sizes, ctx.cell_clip = batch_sizes, cell_clip
        ctx.starts = list(itertools.accumulate(batch_sizes[:-1], initial=0))  # each step's first row
        # Final states of their own (with rows all the same length they are the last step's).
        return kept.outputs, h_n.clone(), c_n.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_outputs, d_h_n, d_c_n):
        x, h0, c0, w_ih, w_hh, w_hr, outputs, output_kept = ctx.saved_tensors
        steps, cells, hiddens = ctx.steps, ctx.cells, ctx.hiddens
        batch_sizes, starts, cell_clip = ctx.batch_sizes, ctx.starts, ctx.cell_clip
        hidden = cells[0].shape[1]
        one = outputs.new_ones(())
        # d loss / d h of every step: from above, then from the next step or the final state
        # (added in place below).
        dh = torch.zeros_like(outputs) if d_outputs is None else d_outputs.clone(memory_format=torch.contiguous_format)
        d_gates = outputs.new_empty(outputs.shape[0], 4 * hidden)
        # d loss / d c of the step before, for its rows that this step still runs (the first)
        dc_next: Optional[torch.Tensor] = None
        for t in range(len(batch_sizes) - 1, -1, -1):
            start, b = starts[t], batch_sizes[t]
            end = start + b
            i, f, g, o, tanh_c = steps[t]
            hidden_t, dg = hiddens[t], d_gates[start:end]
            dh_t = dh[start:end]
            ending = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0  # rows ending here from it
            if d_h_n is not None:
                dh_t[ending:] += d_h_n[ending:b]
            if output_kept is not None:
                dh_t.mul_(output_kept[start:end])
            d_hidden = torch.mm(dh_t, w_hr)
            # output gate: d_hidden tanh(c) o (1 - o) = d_hidden (hidden - hidden o)
            torch.mul(d_hidden, torch.addcmul(hidden_t, hidden_t, o, value=-1), out=dg[:, 3 * hidden :])
            # cell: d_hidden o (1 - tanh(c)^2) = d_hidden (o - hidden tanh(c)), plus the next step's
            dc = d_hidden.mul_(torch.addcmul(o, hidden_t, tanh_c, value=-1))
            if dc_next is not None:
                dc[: dc_next.shape[0]] += dc_next
            if d_c_n is not None:
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


def _previous_outputs(outputs: torch.Tensor, batch_sizes: List[int], starts: List[int]) -> torch.Tensor:
    """Every step's recurrent input from the second on: the first rows of the step before."""
    if batch_sizes[-1] == batch_sizes[0]:
        return outputs[: starts[-1]]
    return torch.cat([outputs[starts[t - 1] : starts[t - 1] + batch_sizes[t]] for t in range(1, len(batch_sizes))])
