"""One ``ClippedLSTM`` layer over packed rows as a single autograd node, its backward written out:
what layers train on outside ``torch.compile`` and the wavefront, on the CPU and the GPU. Autograd
through the step loop records a dozen nodes a step and sums each weight's gradient step by step;
here the forward (the one loop, ``lstm_kernels.run_steps``) keeps the cell's activations and the
backward runs the recurrence in reverse, each weight's gradient one product over all steps. Under
autocast the products run in its dtype, the rest in float32 at least; nothing reads the device
back, so a CUDA graph can record it. Tested against autograd (float64, float32, bf16 autocast) and
numerical gradients (``tests/test_lstm_training.py``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from .lstm_kernels import LayerProducts, LSTMState, run_steps
from .precision import autocast_disabled, autocast_dtype_now

if TYPE_CHECKING:  # nn/lstm.py imports this module
    from .lstm import ClippedLSTM


def packed_training_loop(
    layer: "ClippedLSTM",
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
        layer.weight_hr_l0, batch_sizes, layer.cell(fused_cell), layer.cell_clip,
        layer.proj_clip,
    )  # fmt: skip
    return output, (h_n, c_n)


class _Kept:
    """The products and the cell ``_PackedLayer``'s forward hands to the one loop: the recurrent
    product added in place to the step's gates, the outputs written into one packed tensor, and
    what the backward reads kept step by step (the cell's activations, its state, its output
    before the projection, and where the projection's clip let the gradient through)."""

    def __init__(self, outputs: torch.Tensor, cell: Callable, w_hh: torch.Tensor, w_hr: torch.Tensor,
                 batch_sizes: List[int], cell_clip: Optional[float], proj_clip: Optional[float]) -> None:  # fmt: skip
        self.outputs, self.cell_equations, self.w_hh_t, self.w_hr_t = outputs, cell, w_hh.t(), w_hr.t()
        self.batch_sizes, self.cell_clip, self.proj_clip = batch_sizes, cell_clip, proj_clip
        self.output_kept = None if proj_clip is None else outputs.new_empty(outputs.shape, dtype=torch.bool)
        self.activations: List[tuple] = []
        self.cells: List[torch.Tensor] = []
        self.hiddens: List[torch.Tensor] = []
        self.written = 0
        self.products = LayerProducts(None, self.recurrent, self.project)

    def recurrent(self, gates: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return gates.addmm_(h.to(gates.dtype), self.w_hh_t)

    def cell(self, gates: torch.Tensor, c: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        hidden, c_new, activations = self.cell_equations(gates, c, activations=True)
        self.activations.append(activations)
        self.cells.append(c_new)
        self.hiddens.append(hidden)
        return hidden, c_new

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        start, self.written = self.written, self.written + hidden.shape[0]
        h = torch.mm(hidden.to(self.outputs.dtype), self.w_hr_t, out=self.outputs[start : self.written])
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
        device = x.device.type
        # The products' dtype: autocast's, each weight cast once (not once a step, as autocast
        # would in a CUDA graph's recording), or the input's.
        dtype = autocast_dtype_now(device) or x.dtype
        with autocast_disabled(device):
            w_ih_p, w_hh_p, w_hr_p = (w.to(dtype) for w in (w_ih, w_hh, w_hr))
            outputs = x.new_empty(x.shape[0], w_hr.shape[0], dtype=dtype)
            kept = _Kept(outputs, cell, w_hh_p, w_hr_p, batch_sizes, cell_clip, proj_clip)
            # The gates of every step (the recurrent product added in place, step by step).
            steps = torch.addmm((b_ih + b_hh).to(dtype), x.to(dtype), w_ih_p.t()).split(batch_sizes)
            state = None if h0 is None else (h0, c0)
            _, (h_n, c_n) = run_steps(len(steps), steps.__getitem__, state, kept.products, kept.cell)
        ctx.save_for_backward(x, h0, c0, w_ih, w_hh, w_hr, kept.outputs, kept.output_kept)
        ctx.kept = kept
        # Final states of their own (with rows all the same length they are the last step's).
        return kept.outputs, h_n.clone(), c_n.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, d_outputs, d_h_n, d_c_n):
        x, h0, c0, w_ih, w_hh, w_hr, outputs, output_kept = ctx.saved_tensors
        steps: _Kept = ctx.kept
        with autocast_disabled(x.device.type):
            products = _Products(outputs.dtype, w_ih, w_hh, w_hr)
            # d loss / d h of every step: from above, then from the next step or the final state.
            if d_outputs is None:
                dh = outputs.new_zeros(outputs.shape, dtype=products.float)
            else:
                dh = d_outputs.to(products.float, memory_format=torch.contiguous_format, copy=True)
            d_gates, dc_first = _recurrence_backward(steps, products, dh, output_kept, c0, d_h_n, d_c_n)
            grads = _input_gradients(ctx.needs_input_grad, products, d_gates, dh, x, h0, outputs, steps)
        d_x, d_h0, d_w_ih, d_bias, d_w_hh, d_w_hr = (
            None if grad is None else grad.to(like.dtype)
            for grad, like in zip(grads, (x, h0, w_ih, w_ih, w_hh, w_hr))
        )
        d_c0 = dc_first.to(c0.dtype) if c0 is not None and ctx.needs_input_grad[2] else None
        return d_x, d_h0, d_c0, d_w_ih, d_bias, d_bias, d_w_hh, d_w_hr, None, None, None, None


class _Products:
    """The backward's products as the forward ran them: in ``dtype`` (autocast's, or the input's),
    the results in ``float`` (float32 at least), where the element-wise work runs."""

    def __init__(self, dtype: torch.dtype, w_ih: torch.Tensor, w_hh: torch.Tensor, w_hr: torch.Tensor) -> None:
        self.dtype, self.float = dtype, torch.promote_types(dtype, torch.float32)
        self.w_ih, self.w_hh, self.w_hr = (w.to(dtype) for w in (w_ih, w_hh, w_hr))

    def mm(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a.to(self.dtype), b.to(self.dtype)).to(self.float)

    def add_mm(self, out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
        """out += a @ b."""
        if a.dtype == b.dtype == out.dtype:
            out.addmm_(a, b)
        else:
            out += torch.mm(a.to(self.dtype), b.to(self.dtype))


def _recurrence_backward(
    steps: _Kept,
    products: _Products,
    dh: torch.Tensor,
    output_kept: Optional[torch.Tensor],
    c0: Optional[torch.Tensor],
    d_h_n: Optional[torch.Tensor],
    d_c_n: Optional[torch.Tensor],
) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The steps in reverse: every step's gate gradients (n, 4 * hidden), ``dh`` completed in
    place with each step's recurrent and final-state gradients, and the first cell state's."""
    cells, hiddens, batch_sizes, cell_clip = steps.cells, steps.hiddens, steps.batch_sizes, steps.cell_clip
    starts, hidden = _starts(batch_sizes), cells[0].shape[1]
    d_gates = dh.new_empty(dh.shape[0], 4 * hidden)
    one = d_gates.new_ones(())
    # d loss / d c of the step before, for its rows that this step still runs (the first)
    dc_next: Optional[torch.Tensor] = None
    for t in range(len(batch_sizes) - 1, -1, -1):
        start, b = starts[t], batch_sizes[t]
        i, f, g, o, tanh_c = steps.activations[t]
        hidden_t, dg, dh_t = hiddens[t], d_gates[start : start + b], dh[start : start + b]
        ending = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0  # rows ending at this step
        if d_h_n is not None:
            dh_t[ending:] += d_h_n[ending:b]
        if output_kept is not None:
            dh_t.mul_(output_kept[start : start + b])
        d_hidden = products.mm(dh_t, products.w_hr)
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
            products.add_mm(dh[starts[t - 1] : starts[t - 1] + b], dg, products.w_hh)
    return d_gates, dc_next


def _input_gradients(
    wanted: Tuple[bool, ...],
    products: _Products,
    d_gates: torch.Tensor,
    dh: torch.Tensor,
    x: torch.Tensor,
    h0: Optional[torch.Tensor],
    outputs: torch.Tensor,
    steps: _Kept,
) -> Tuple[Optional[torch.Tensor], ...]:
    """The gradients of x, h0, w_ih, the biases, w_hh and w_hr (those ``wanted``), each weight's one
    product over all steps."""
    batch_sizes, first = steps.batch_sizes, steps.batch_sizes[0]
    d_x = products.mm(d_gates, products.w_ih) if wanted[0] else None
    d_h0 = products.mm(d_gates[:first], products.w_hh) if h0 is not None and wanted[1] else None
    d_w_ih = products.mm(d_gates.t(), x) if wanted[3] else None
    d_bias = d_gates.sum(0) if wanted[4] or wanted[5] else None
    d_w_hh = None
    if wanted[6]:
        d_w_hh = products.mm(d_gates[first:].t(), _previous_outputs(outputs, batch_sizes))
        if h0 is not None:
            products.add_mm(d_w_hh, d_gates[:first].t(), h0)
    d_w_hr = products.mm(dh.t(), torch.cat(steps.hiddens)) if wanted[7] else None
    return d_x, d_h0, d_w_ih, d_bias, d_w_hh, d_w_hr


def _starts(batch_sizes: List[int]) -> List[int]:
    """Each step's first row in the packed tensors."""
    return list(itertools.accumulate(batch_sizes[:-1], initial=0))


def _previous_outputs(outputs: torch.Tensor, batch_sizes: List[int]) -> torch.Tensor:
    """Every step's recurrent input from the second on: the first rows of the step before."""
    starts = _starts(batch_sizes)
    if batch_sizes[-1] == batch_sizes[0]:
        return outputs[: starts[-1]]
    return torch.cat([outputs[starts[t - 1] : starts[t - 1] + batch_sizes[t]] for t in range(1, len(batch_sizes))])
