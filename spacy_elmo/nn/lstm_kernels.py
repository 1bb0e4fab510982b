"""The recurrence of one ``ClippedLSTM`` layer, written once: ``run_steps``.

Each step adds the recurrent product to the step's input products, runs the cell
(``ClippedLSTM.cell``) and the clipped projection, states row-major (rows, features). What differs
from run to run is handed to the loop: the products (float, cast once under autocast, or int8
weights: ``LayerProducts``), the rows (packed rows sorted by length end where a step's input has
fewer rows; fixed shapes keep every row, and a ``valid`` mask freezes the ones that ended), each
step's input (computed for the whole layer first, or step by step where the wavefront makes it),
and a hook after each step (the wavefront's CUDA events; the training loop of
``nn/lstm_training.py`` keeps the activations its backward reads through the products and the
cell it hands over). The drivers below feed it: ``packed_layer`` (packed rows: inference),
``dense_layer`` (fixed shapes: CUDA graphs, and windows under ``torch.compile``) and
``wavefront_loop`` (a direction's layers step by step). ``fused_packed``/``fused_dense`` are
torch's own LSTM (cuDNN; unclipped layers only). docs/design.md says which runs where.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch.nn.utils.rnn import PackedSequence

from .int8 import Int8Weight
from .precision import autocast_dtype_now

if TYPE_CHECKING:  # the layers these run (nn/lstm.py imports this module)
    from .lstm import ClippedLSTM as LSTMLayer

LSTMState = Tuple[torch.Tensor, torch.Tensor]
#: One direction's outputs per layer and its final (h, c) per layer.
DirectionOutputs = Tuple[List[torch.Tensor], List[LSTMState]]
#: One step's cell update: (gates (rows, 4 * hidden), c or None for zeros) -> (hidden, c_new).
Cell = Callable[[torch.Tensor, Optional[torch.Tensor]], Tuple[torch.Tensor, torch.Tensor]]


class DistinctInputs(NamedTuple):
    """Repeating inputs stored once: ``rows`` (n_distinct, input_size), ``index`` per position."""

    rows: torch.Tensor
    index: torch.Tensor


class LayerProducts(NamedTuple):
    """A layer's three products, row-major: ``inputs(x)`` = x W_ih^T + b_ih + b_hh, (n, input_size)
    -> (n, 4 * hidden); ``recurrent(gates, h)`` = gates + h W_hh^T; ``project(hidden)`` = the
    clipped hidden W_hr^T."""

    inputs: Callable[[torch.Tensor], torch.Tensor]
    recurrent: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    project: Callable[[torch.Tensor], torch.Tensor]


def run_steps(
    steps: int,
    step_input: Callable[[int], torch.Tensor],
    state: Optional[LSTMState],
    products: LayerProducts,
    cell: Cell,
    valid: Optional[torch.Tensor] = None,
    after_step: Optional[Callable[[int, torch.Tensor], None]] = None,
) -> Tuple[List[torch.Tensor], LSTMState]:
    """The loop of one layer over ``steps`` time steps.

    Args:
        step_input: t -> step t's input products (rows_t, 4 * hidden); rows_t never grows, and
            where it shrinks the last rows have ended (packed rows sorted by length).
        state: (h0 (rows, proj_size), c0 (rows, hidden_size)), or None for zeros (no recurrent
            product at the first step).
        valid: (rows, steps) bool, fixed shapes only (a state given): where False the row's
            state stays as it was and its output is zero.
        after_step: called with t and step t's output once the step is queued.
    Returns:
        each step's output (rows_t, proj_size) and every row's final (h, c), rows in order."""
    h, c = (None, None) if state is None else state
    outputs: List[torch.Tensor] = []
    ended: List[LSTMState] = []
    for t in range(steps):
        gates = step_input(t)
        if h is not None:
            rows = gates.shape[0]
            if rows < h.shape[0]:  # the last rows have ended: keep their state
                ended.append((h[rows:], c[rows:]))
                h, c = h[:rows], c[:rows]
            gates = products.recurrent(gates, h)
        hidden, c_new = cell(gates, c)
        h_new = products.project(hidden)
        if valid is None:
            h, c = h_new, c_new
            outputs.append(h_new)
        else:
            keep = valid[:, t, None]
            c = torch.where(keep, c_new, c)
            h = torch.where(keep, h_new, h)
            outputs.append(h_new * keep)
        if after_step is not None:
            after_step(t, outputs[-1])
    if not ended:
        return outputs, (h, c)
    ended.append((h, c))
    return outputs, (torch.cat([s[0] for s in reversed(ended)]), torch.cat([s[1] for s in reversed(ended)]))


def zero_state(layer: LSTMLayer, batch_size: int, like: torch.Tensor) -> LSTMState:
    """Zero (h, c) for ``batch_size`` rows, at least float32 (the cell state under autocast)."""
    dtype = torch.promote_types(like.dtype, torch.float32)
    return (
        like.new_zeros(batch_size, layer.proj_size, dtype=dtype),
        like.new_zeros(batch_size, layer.hidden_size, dtype=dtype),
    )


def float_products(layer: LSTMLayer) -> LayerProducts:
    """The layer's products on its float weights, transposed for row-major states and cast once
    to the dtype of the autocast in force. A CUDA graph's recording runs autocast without its
    weight cache, which would cast each weight again at every time step (and each step's gradient
    back); eager autocast casts once too, so both steps compute the same."""
    bias = layer.bias_ih_l0 + layer.bias_hh_l0
    weights = (layer.weight_ih_l0, layer.weight_hh_l0, layer.weight_hr_l0)
    dtype = autocast_dtype_now(layer.weight_hh_l0.device.type)
    if dtype is not None:
        weights = tuple(w.to(dtype) for w in weights)
    w_ih, w_hh, w_hr = (w.t() for w in weights)
    return LayerProducts(
        lambda x: torch.addmm(bias, x, w_ih),
        lambda gates, h: torch.addmm(gates, h, w_hh),
        lambda hidden: layer.clip_output(hidden.mm(w_hr)),
    )


def int8_weight_products(layer: LSTMLayer) -> LayerProducts:
    """The layer's products on int8 weights (``nn/int8.py``), float32 out."""
    w_ih = Int8Weight.for_weight(layer.weight_ih_l0, layer, "_int8_ih")
    w_hh = Int8Weight.for_weight(layer.weight_hh_l0, layer, "_int8_hh")
    w_hr = Int8Weight.for_weight(layer.weight_hr_l0, layer, "_int8_hr")
    bias = (layer.bias_ih_l0 + layer.bias_hh_l0).float()
    return LayerProducts(
        lambda x: w_ih(x, bias),
        lambda gates, h: gates + w_hh(h),
        lambda hidden: layer.clip_output(w_hr(hidden)),
    )


def packed_layer(
    layer: LSTMLayer,
    products: LayerProducts,
    data: torch.Tensor,
    batch_sizes: List[int],
    state: Optional[LSTMState],
    distinct: Optional[DistinctInputs] = None,
    fused_cell: bool = False,
) -> Tuple[torch.Tensor, LSTMState]:
    """Packed rows sorted by decreasing length: data (n_tokens, input_size), time-major, or
    ``distinct`` rows and each packed position's index into them (their input products made once)
    -> the packed (n_tokens, proj_size) outputs and every row's final (h, c), in sorted order."""
    if distinct is None:
        x_gates = products.inputs(data)
    else:
        x_gates = products.inputs(distinct.rows).index_select(0, distinct.index)
    steps = x_gates.split(batch_sizes)
    cell = layer.cell(fused_cell)
    outputs, final = run_steps(len(steps), steps.__getitem__, state, products, cell)
    return torch.cat(outputs), final


def dense_layer(
    layer: LSTMLayer,
    x: torch.Tensor,
    valid: Optional[torch.Tensor],
    state: Optional[LSTMState] = None,
    fused_cell: bool = False,
) -> Tuple[torch.Tensor, LSTMState]:
    """Every row runs every step; a row's state stops changing after its last valid step.

    Args:
        x: (batch, T, input_size), each row in reading order, padding after its tokens.
        valid: (batch, T) bool, True at tokens; None: every position is a token (windows).
        state: (h0 (batch, proj_size), c0 (batch, hidden_size)), or None for zeros.
    Returns:
        (batch, T, proj_size) outputs (zero at padding) and each row's final (h, c)."""
    step_gates, products = _window_products(layer, x)
    state = zero_state(layer, x.shape[0], step_gates[0]) if state is None else state
    cell = layer.cell(fused_cell)
    outputs, final = run_steps(len(step_gates), step_gates.__getitem__, state, products, cell, valid)
    return torch.stack(outputs, dim=1), final


def _window_products(layer: LSTMLayer, x: torch.Tensor) -> Tuple[Sequence[torch.Tensor], LayerProducts]:
    """The input products of every step of a window x (batch, T, input_size) at once, taken apart
    once (``unbind``: the backward stacks the steps' gradients once, where ``x_gates[:, t]`` would
    make each a zero-filled window-sized tensor, summed step by step), and the products the steps
    use."""
    batch, steps, _ = x.shape
    products = float_products(layer)
    return products.inputs(x.reshape(batch * steps, -1)).view(batch, steps, -1).unbind(1), products


def wavefront_loop(
    layers: Sequence[LSTMLayer],
    x: torch.Tensor,
    states: Optional[Sequence[LSTMState]],
    masks: Optional[Sequence[torch.Tensor]],
    skip: bool,
    streams: Optional[Sequence["torch.cuda.Stream"]] = None,
    fused_cell: bool = False,
) -> DirectionOutputs:
    """All layers of one direction over windows, each layer's step t reading only the layer below's
    step t: ``run_steps`` per layer, the first layer's input products made for the whole window,
    the others' step by step. With ``streams`` (CUDA, one per layer, forked by the caller) each
    layer waits per step on an event of the layer below only, so layer i's step t overlaps layer
    i - 1's step t + 1, forward and backward; without, the same ops run in order (the CPU).

    Args:
        x: (batch, T, input_size) in reading order.
        states: per layer (h0, c0), or None for zeros.
        masks: per layer the input's scaled dropout mask (batch, T, width), or None.
        skip: layers from the second on add their input to their output (not fed back).
        fused_cell: the cell compiled.
    Returns:
        per layer the (batch, T, proj_size) outputs and the final (h, c)."""
    below: List[torch.Tensor] = []  # the layer below's output at each step
    below_events: List[Any] = []
    layer_outputs: List[torch.Tensor] = []
    finals: List[LSTMState] = []
    for i, layer in enumerate(layers):
        stream = streams[i] if streams else None
        mask = None if masks is None else masks[i]
        outputs: List[torch.Tensor] = []
        events: List[Any] = []
        with torch.cuda.stream(stream) if stream is not None else nullcontext():
            if i == 0:
                step_gates, products = _window_products(layer, x if mask is None else x * mask)
                step_input = step_gates.__getitem__
            else:
                products = float_products(layer)
                step_input = _after_the_layer_below(products, below, below_events, mask, stream)
            state = zero_state(layer, x.shape[0], x) if states is None else states[i]
            cell = layer.cell(fused_cell)
            keep = _keeping(outputs, events, below if skip and i > 0 else None, stream)
            finals.append(run_steps(x.shape[1], step_input, state, products, cell, after_step=keep)[1])
            layer_outputs.append(torch.stack(outputs, dim=1))
        below, below_events = outputs, events
    return layer_outputs, finals


def _after_the_layer_below(
    products: LayerProducts,
    below: List[torch.Tensor],
    events: List[Any],
    mask: Optional[torch.Tensor],
    stream: Optional["torch.cuda.Stream"],
) -> Callable[[int], torch.Tensor]:
    """A wavefront layer's step input: t -> the input products of the layer below's step t
    (masked), once that step is done (on CUDA, ``events[t]``)."""

    def step_input(t: int) -> torch.Tensor:
        if events:
            stream.wait_event(events[t])
            if not torch.cuda.is_current_stream_capturing():  # read here, made there
                below[t].record_stream(stream)
        return products.inputs(below[t] if mask is None else below[t] * mask[:, t])

    return step_input


def _keeping(
    outputs: List[torch.Tensor],
    events: List[Any],
    skip_from: Optional[List[torch.Tensor]],
    stream: Optional["torch.cuda.Stream"],
) -> Callable[[int, torch.Tensor], None]:
    """A wavefront layer's hook after each step: its output kept (plus ``skip_from``'s at that
    step), and on CUDA an event recorded on ``stream``."""

    def after_step(t: int, h: torch.Tensor) -> None:
        outputs.append(h if skip_from is None else h + skip_from[t])
        if stream is not None:
            event = torch.cuda.Event()
            event.record(stream)
            events.append(event)

    return after_step


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
