"""The ways to run the steps of one ``ClippedLSTM`` layer, each a function of the layer.

All but the fused ones run the layer's ``cell`` and ``clip_output`` (``nn/lstm.py``) and differ in
how they lay out states and products: ``packed_loop`` (float, packed rows, feature-major states so
each step is a tall-skinny ``W @ h``), ``dense_loop`` (data-independent shapes, for CUDA graphs),
``int8_loop``, ``wavefront_loop`` (a direction's layers overlapping step by step), and
``fused_packed``/``fused_dense`` (torch's LSTM, unclipped layers only). The manual's "Design" says
which runs where.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, List, NamedTuple, Optional, Protocol, Sequence, Tuple

import torch
from torch.nn.utils.rnn import PackedSequence

from .int8 import Int8Weight
from .precision import autocast_dtype_now, compiling

LSTMState = Tuple[torch.Tensor, torch.Tensor]
#: One direction's outputs per layer and its final (h, c) per layer.
DirectionOutputs = Tuple[List[torch.Tensor], List[LSTMState]]


class LSTMLayer(Protocol):
    """What a kernel reads of a ``ClippedLSTM``: parameters, sizes, clips and the cell."""

    input_size: int
    hidden_size: int
    proj_size: int
    weight_ih_l0: torch.Tensor
    weight_hh_l0: torch.Tensor
    weight_hr_l0: torch.Tensor
    bias_ih_l0: torch.Tensor
    bias_hh_l0: torch.Tensor

    @property
    def clipped(self) -> bool: ...

    def cell(
        self, gates: torch.Tensor, c: Optional[torch.Tensor], dim: int, activations: bool = False, fused: bool = False
    ) -> tuple: ...

    def clip_output(self, h: torch.Tensor) -> torch.Tensor: ...


class DistinctInputs(NamedTuple):
    """Repeating inputs stored once: ``rows`` (n_distinct, input_size), ``index`` per position."""

    rows: torch.Tensor
    index: torch.Tensor


def zero_state(layer: LSTMLayer, batch_size: int, like: torch.Tensor) -> LSTMState:
    """Zero (h, c) for ``batch_size`` rows, at least float32 (the cell state under autocast)."""
    dtype = torch.promote_types(like.dtype, torch.float32)
    return (
        like.new_zeros(batch_size, layer.proj_size, dtype=dtype),
        like.new_zeros(batch_size, layer.hidden_size, dtype=dtype),
    )


def input_gates(layer: LSTMLayer, x: torch.Tensor) -> torch.Tensor:
    """(n, input_size) -> feature-major (4 * hidden_size, n): x W_ih^T + b_ih + b_hh."""
    bias = (layer.bias_ih_l0 + layer.bias_hh_l0)[:, None]
    return torch.addmm(bias, layer.weight_ih_l0, x.t())


def step_weights(layer: LSTMLayer) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The layer's input, recurrent and projection weights, transposed for row-major states, cast
    once to the dtype of the autocast in force. A CUDA graph's recording runs autocast without its
    weight cache, which would cast each weight again at every time step (and each step's gradient
    back); eager autocast casts once too, so both steps compute the same."""
    weights = (layer.weight_ih_l0, layer.weight_hh_l0, layer.weight_hr_l0)
    dtype = autocast_dtype_now(layer.weight_hh_l0.device.type)
    if dtype is not None and layer.weight_hh_l0.is_floating_point():
        weights = tuple(w.to(dtype) for w in weights)
    return weights[0].t(), weights[1].t(), weights[2].t()


class _WindowSteps(NamedTuple):
    """A window's steps for the recurrence: each step's input products, the recurrent weight the
    steps multiply by, and ``record(h)``, called with each step's previous output before it is."""

    gates: Tuple[torch.Tensor, ...]
    w_hh: torch.Tensor
    record: Callable[[torch.Tensor], None]


def _window_steps(x_gates: torch.Tensor, w_hh: torch.Tensor) -> _WindowSteps:
    """The steps of ``x_gates`` (batch, T, 4 * hidden), taken apart once (``unbind``: the backward
    stacks the steps' gradients once, where ``x_gates[:, t]`` would make each a zero-filled
    window-sized tensor, summed step by step). Where ``w_hh`` needs a gradient (outside
    ``torch.compile``), the steps multiply by it detached and its gradient is one product over the
    window (``_RecurrentWeightGradient``), not a product and a sum per step."""
    if not (torch.is_grad_enabled() and w_hh.requires_grad) or compiling():
        return _WindowSteps(x_gates.unbind(1), w_hh, lambda h: None)
    previous: List[torch.Tensor] = []
    x_gates = _RecurrentWeightGradient.apply(x_gates, w_hh, previous)
    return _WindowSteps(x_gates.unbind(1), w_hh.detach(), lambda h: previous.append(h.detach()))


class _RecurrentWeightGradient(torch.autograd.Function):
    """Passes a window's input products through. Their gradient is every step's gate gradient, so
    the backward also gives the recurrent weight's, ``sum_t h_(t-1)^T dgates_t``, as one product
    over the window (accumulated in float32 inside it) from the outputs the loop recorded."""

    @staticmethod
    def forward(ctx: Any, x_gates: torch.Tensor, w_hh: torch.Tensor, previous: List[torch.Tensor]) -> torch.Tensor:
        ctx.previous, ctx.w_dtype = previous, w_hh.dtype
        return x_gates.view_as(x_gates)

    @staticmethod
    def backward(ctx: Any, d_gates: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, None]:
        h_previous = torch.stack([h.to(d_gates.dtype) for h in ctx.previous], dim=1)
        d_w = h_previous.flatten(0, 1).t().mm(d_gates.flatten(0, 1))
        return d_gates, d_w.to(ctx.w_dtype), None


def packed_loop(
    layer: LSTMLayer, x_gates: torch.Tensor, batch_sizes: List[int], state: Optional[LSTMState]
) -> Tuple[torch.Tensor, LSTMState]:
    """x_gates: feature-major (4 * hidden, n_tokens) packed input products -> the packed (n_tokens,
    proj_size) outputs and every row's final (h, c); state in sorted row order or None."""
    w_hh, w_hr = layer.weight_hh_l0, layer.weight_hr_l0
    steps = x_gates.split(batch_sizes, dim=1)
    h, c = (None, None) if state is None else (state[0].t(), state[1].t())
    outputs: List[torch.Tensor] = []
    finished: List[LSTMState] = []
    for step_gates in steps:
        gates = step_gates
        if h is not None:
            n_running = step_gates.shape[1]
            if n_running < h.shape[1]:
                # The shortest rows (at the end, as rows are sorted) have ended: keep their state.
                finished.append((h[:, n_running:], c[:, n_running:]))
                h, c = h[:, :n_running], c[:, :n_running]
            gates = torch.addmm(step_gates, w_hh, h)
        out, c = layer.cell(gates, c, dim=0)
        h = layer.clip_output(w_hr.mm(out))
        outputs.append(h)
    finished.append((h, c))
    h_n = torch.cat([part[0] for part in reversed(finished)], dim=1).t()
    c_n = torch.cat([part[1] for part in reversed(finished)], dim=1).t()
    return torch.cat(outputs, dim=1).t().contiguous(), (h_n, c_n)


def int8_loop(
    layer: LSTMLayer, data: torch.Tensor, batch_sizes: List[int], state: Optional[LSTMState]
) -> Tuple[torch.Tensor, LSTMState]:
    """The packed loop on int8 weights (``nn/int8.py``), row-major states, cell state float32."""
    w_ih = Int8Weight.for_weight(layer.weight_ih_l0, layer, "_int8_ih")
    w_hh = Int8Weight.for_weight(layer.weight_hh_l0, layer, "_int8_hh")
    w_hr = Int8Weight.for_weight(layer.weight_hr_l0, layer, "_int8_hr")
    x_gates = w_ih(data, (layer.bias_ih_l0 + layer.bias_hh_l0).float())
    h, c = (None, None) if state is None else (state[0].float(), state[1].float())
    outputs: List[torch.Tensor] = []
    finished: List[LSTMState] = []
    start = 0
    for n_running in batch_sizes:
        gates = x_gates[start : start + n_running]
        start += n_running
        if h is not None:
            if n_running < h.shape[0]:
                finished.append((h[n_running:], c[n_running:]))
                h, c = h[:n_running], c[:n_running]
            gates = gates + w_hh(h)
        out, c = layer.cell(gates, c, dim=1)
        h = layer.clip_output(w_hr(out))
        outputs.append(h)
    finished.append((h, c))
    h_n = torch.cat([part[0] for part in reversed(finished)])
    c_n = torch.cat([part[1] for part in reversed(finished)])
    return torch.cat(outputs), (h_n, c_n)


def dense_loop(
    layer: LSTMLayer,
    x: torch.Tensor,
    valid: Optional[torch.Tensor],
    state: Optional[LSTMState] = None,
    fused_cell: bool = False,
) -> Tuple[torch.Tensor, LSTMState]:
    """Every row runs every step; a row's state stops changing after its last valid step
    (``fused_cell``: the cell compiled).

    Args:
        x: (batch, T, input_size), each row in reading order, padding after its tokens.
        valid: (batch, T) bool, True at tokens; None: every position is a token (windows).
        state: (h0 (batch, proj_size), c0 (batch, hidden_size)), or None for zeros.
    Returns:
        (batch, T, proj_size) outputs (zero at padding) and each row's final (h, c)."""
    batch, steps, _ = x.shape
    bias = layer.bias_ih_l0 + layer.bias_hh_l0
    w_ih, w_hh, w_hr = step_weights(layer)
    x_gates = torch.addmm(bias, x.reshape(batch * steps, -1), w_ih).view(batch, steps, -1)
    h, c = zero_state(layer, batch, x_gates) if state is None else state
    window = _window_steps(x_gates, w_hh)
    outputs: List[torch.Tensor] = []
    for t in range(steps):
        window.record(h)
        out, c_new = layer.cell(torch.addmm(window.gates[t], h, window.w_hh), c, dim=1, fused=fused_cell)
        h_new = layer.clip_output(out.mm(w_hr))
        if valid is None:
            h, c = h_new, c_new
            outputs.append(h_new)
            continue
        keep = valid[:, t, None]
        c = torch.where(keep, c_new, c)
        h = torch.where(keep, h_new, h)
        outputs.append(h_new * keep)
    return torch.stack(outputs, dim=1), (h, c)


def wavefront_loop(
    layers: Sequence[LSTMLayer],
    x: torch.Tensor,
    states: Optional[Sequence[LSTMState]],
    masks: Optional[Sequence[torch.Tensor]],
    skip: bool,
    streams: Optional[Sequence["torch.cuda.Stream"]] = None,
    fused_cell: bool = False,
) -> Tuple[torch.Tensor, List[LSTMState]]:
    """All layers of one direction over windows, each layer's step t reading only the layer below's
    step t. With ``streams`` (CUDA, one per layer, forked by the caller) each layer waits per step
    on an event of the layer below only, so layer i's step t overlaps layer i - 1's step t + 1,
    forward and backward; without, the same ops run in order (the CPU).

    Args:
        x: (batch, T, input_size) in reading order.
        states: per layer (h0, c0), or None for zeros.
        masks: per layer the input's scaled dropout mask (batch, T, width), or None.
        skip: layers from the second on add their input to their output (not fed back).
    Returns:
        the top layer's (batch, T, proj_size) output and each layer's final (h, c)."""
    batch, steps, _ = x.shape
    below: List[torch.Tensor] = []
    below_events: List[Any] = []
    finals: List[LSTMState] = []
    for i, layer in enumerate(layers):
        stream = streams[i] if streams else None
        with torch.cuda.stream(stream) if stream is not None else nullcontext():
            bias = layer.bias_ih_l0 + layer.bias_hh_l0
            w_ih, w_hh, w_hr = step_weights(layer)
            if i == 0:
                first = x if masks is None else x * masks[0]
                x_gates = torch.addmm(bias, first.reshape(batch * steps, -1), w_ih).view(batch, steps, -1)
                window = _window_steps(x_gates, w_hh)
            h, c = zero_state(layer, batch, x) if states is None else states[i]
            outputs: List[torch.Tensor] = []
            events: List[Any] = []
            for t in range(steps):
                if i == 0:
                    window.record(h)
                    gates = torch.addmm(window.gates[t], h, window.w_hh)
                else:
                    if below_events:
                        stream.wait_event(below_events[t])
                        if not torch.cuda.is_current_stream_capturing():  # read here, made there
                            below[t].record_stream(stream)
                    step_input = below[t] if masks is None else below[t] * masks[i][:, t]
                    gates = torch.addmm(torch.addmm(bias, step_input, w_ih), h, w_hh)
                out, c = layer.cell(gates, c, dim=1, fused=fused_cell)
                h = layer.clip_output(out.mm(w_hr))
                outputs.append(h + below[t] if i > 0 and skip else h)
                if stream is not None:
                    event = torch.cuda.Event()
                    event.record(stream)
                    events.append(event)
            finals.append((h, c))
        below, below_events = outputs, events
    return torch.stack(below, dim=1), finals


def fused_packed(
    layer: LSTMLayer, data: torch.Tensor, batch_sizes: torch.Tensor, state: Optional[LSTMState]
) -> Tuple[torch.Tensor, LSTMState]:
    """torch's own LSTM (cuDNN on a GPU) over the packed rows; unclipped layers only."""
    if layer.clipped:
        raise ValueError("fused_packed: torch's LSTM has no cell or projection clipping")
    if state is None:
        state = zero_state(layer, int(batch_sizes[0]), data)
    output, (h_n, c_n) = torch.nn.LSTM.forward(
        layer, PackedSequence(data, batch_sizes), (state[0][None], state[1][None])
    )
    return output.data, (h_n[0], c_n[0])


def fused_dense(
    layer: LSTMLayer, x: torch.Tensor, state: Optional[LSTMState]
) -> Tuple[torch.Tensor, LSTMState]:
    """torch's own LSTM (unclipped layers only) over rows that are all tokens, from given states: x
    (batch, T, input_size) -> (batch, T, proj_size) and each row's final (h, c)."""
    if layer.clipped:
        raise ValueError("fused_dense: torch's LSTM has no cell or projection clipping")
    if state is None:
        state = zero_state(layer, x.shape[0], x)
    output, (h_n, c_n) = torch.nn.LSTM.forward(
        layer, x.transpose(0, 1), (state[0][None].to(x.dtype), state[1][None].to(x.dtype))
    )
    # Contiguous as the dense loop's: the next layer's dropout draws its mask in memory order.
    return output.transpose(0, 1).contiguous(), (h_n[0], c_n[0])
