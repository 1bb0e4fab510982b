"""The LSTM with projection and clipping (``spacy_elmo.nn.lstm``): one direction, checked
against a step-by-step loop of the cell equations in NumPy."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from spacy_elmo.nn import lstm_kernels
from spacy_elmo.nn.lstm import DirectionalLSTM, reverse_padded
from spacy_elmo.nn.precision import precision_context, runs_on


def _step_by_step(layer, x, clip):
    """h_t = clip(W_hr (o * tanh c_t)), c_t = clip(f c + i g), torch's gate order i, f, g, o."""
    w_ih, w_hh = layer.weight_ih_l0.detach().cpu().numpy(), layer.weight_hh_l0.detach().cpu().numpy()
    b = (layer.bias_ih_l0 + layer.bias_hh_l0).detach().cpu().numpy()
    w_hr = layer.weight_hr_l0.detach().cpu().numpy()
    hidden = layer.hidden_size
    h, c, out = np.zeros(w_hr.shape[0]), np.zeros(hidden), []
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for x_t in x:
        gates = w_ih @ x_t + w_hh @ h + b
        i, f, g, o = (gates[k * hidden : (k + 1) * hidden] for k in range(4))
        c = np.clip(sigmoid(f) * c + sigmoid(i) * np.tanh(g), -clip, clip)
        h = np.clip(w_hr @ (sigmoid(o) * np.tanh(c)), -clip, clip)
        out.append(h)
    return np.array(out)


def _lstm(device: torch.device) -> DirectionalLSTM:
    torch.manual_seed(0)
    lstm = DirectionalLSTM(4, 6, 3, num_layers=1, cell_clip=0.5, proj_clip=0.5)
    with torch.no_grad():
        for p in lstm.parameters():
            p.mul_(3)  # large enough that the clips bite
    return lstm.to(device)


def _run(lstm: DirectionalLSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The top layer's output in float32 (on CUDA with TF32 off: the `device` fixture), back on
    the CPU."""
    device = next(lstm.parameters()).device
    (out,), _ = lstm(x.to(device), lengths.to(device))
    return out.detach().cpu()


def test_forward_direction_is_the_cell_equations_with_clipping(device):
    lstm = _lstm(device)
    x = torch.randn(2, 5, 4)
    lengths = torch.tensor([5, 3])
    out = _run(lstm, x, lengths)
    for row, n in enumerate(lengths.tolist()):
        expected = _step_by_step(lstm.layers[0], x[row, :n].numpy(), 0.5)
        np.testing.assert_allclose(out[row, :n].numpy(), expected, rtol=1e-4, atol=1e-5)
        assert (out[row, n:] == 0).all()
    assert out.abs().max() <= 0.5


def test_backward_direction_reads_each_row_from_its_last_token(device):
    """``run_directions`` (the one engine of both directions) with each row of distinct tokens
    read forward and reversed (``BiLM``'s reading orders): the backward direction's outputs, in
    its reading order, are the cell equations over the reversed row."""
    from spacy_elmo.nn.directions import run_directions

    lstms = (_lstm(device), _lstm(device))
    rows = torch.randn(6, 4)
    index = torch.tensor([[0, 1, 2, 3, 4], [5, 2, 0, 0, 0]])
    lengths = torch.tensor([5, 2])
    reading = torch.stack([index, reverse_padded(index, lengths)]).to(device)
    with torch.no_grad():
        _, ((out,), _) = run_directions(lstms, rows.to(device), reading, lengths.to(device), None)
    for row, n in enumerate(lengths.tolist()):
        expected = _step_by_step(lstms[1].layers[0], rows[index[row, :n]].numpy()[::-1], 0.5)
        np.testing.assert_allclose(out[row, :n].cpu().numpy(), expected, rtol=1e-4, atol=1e-5)


def test_reverse_padded_keeps_padding_in_place():
    x = torch.arange(8.0).reshape(2, 4, 1)
    reversed_ = reverse_padded(x, torch.tensor([4, 2]))
    assert reversed_[:, :, 0].tolist() == [[3, 2, 1, 0], [5, 4, 6, 7]]


def test_dense_loop_is_the_cell_equations_and_freezes_finished_rows(device):
    """``fixed_shapes`` (the loop CUDA graphs record: every row every step) against the NumPy
    loop, per row; padding zero; a row of length 0 stays zero; final states are each row's last."""
    lstm = _lstm(device)
    x = torch.randn(3, 6, 4)
    lengths = torch.tensor([6, 2, 0])
    x[1, 2:] = 0
    x[2] = 0
    with torch.no_grad():
        (out,), ((h, _),) = lstm(x.to(device), lengths.to(device), fixed_shapes=True)
    out, h = out.cpu(), h.cpu()
    for row, n in enumerate(lengths.tolist()[:2]):
        expected = _step_by_step(lstm.layers[0], x[row, :n].numpy(), 0.5)
        np.testing.assert_allclose(h[row].numpy(), expected[-1], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(out[row, :n].numpy(), expected, rtol=1e-4, atol=1e-5)
        assert (out[row, n:] == 0).all()
    assert (out[2] == 0).all() and (h[2] == 0).all()


def test_dense_loop_equals_the_packed_loop_with_two_layers_and_skip_connections(device):
    torch.manual_seed(1)
    lstm = DirectionalLSTM(5, 7, 5, num_layers=2, cell_clip=1.0, proj_clip=1.0).to(device)
    lengths = torch.tensor([4, 9, 1, 6])
    valid = torch.arange(9)[None, :] < lengths[:, None]
    x = torch.randn(4, 9, 5) * valid[:, :, None]
    with torch.no_grad():
        packed, packed_states = lstm(x.to(device), lengths.to(device))
        dense, dense_states = lstm(x.to(device), lengths.to(device), fixed_shapes=True)
    for a, b in zip(packed, dense):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for (h_a, c_a), (h_b, c_b) in zip(packed_states, dense_states):
        torch.testing.assert_close(h_b, h_a, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c_b, c_a, rtol=1e-5, atol=1e-6)


def test_torchs_fused_lstm_over_windows_equals_the_dense_loop(device):
    """``fused_dense`` (torch's LSTM, cuDNN on a GPU: the "fast" recipe's windows) against the
    dense loop, from given states, for an unclipped layer; a clipped one is refused."""
    from spacy_elmo.nn import lstm_kernels
    from spacy_elmo.nn.lstm import ClippedLSTM

    torch.manual_seed(0)
    layer = ClippedLSTM(5, 7, 4).to(device)
    x = torch.randn(3, 6, 5, device=device)
    state = (torch.randn(3, 4, device=device), torch.randn(3, 7, device=device))
    with torch.no_grad():
        fused, (h, c) = lstm_kernels.fused_dense(layer, x, state)
        dense, (h2, c2) = lstm_kernels.dense_layer(layer, x, None, state)
    for a, b in ((fused, dense), (h, h2), (c, c2)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="no cell or projection clipping"):
        lstm_kernels.fused_dense(ClippedLSTM(5, 7, 4, cell_clip=3.0), x.cpu(), None)


def test_windows_run_and_train_as_the_dense_loop(device):
    """``run_dense`` over windows (every position valid: on the CPU the packed kernels over
    time-major rows, the training loop where gradients are wanted) against the dense loop over
    the same windows from given states: outputs, final states, and the gradients of the inputs,
    the initial states and every parameter; clipped and not."""
    from spacy_elmo.nn import lstm_kernels
    from spacy_elmo.nn.lstm import ClippedLSTM

    def windows(layer, x, state):
        return layer.run_dense(x, None, state)

    def dense(layer, x, state):
        return lstm_kernels.dense_layer(layer, x, None, state)

    for clip in (None, 1.0):
        torch.manual_seed(0)
        layer = ClippedLSTM(5, 7, 4, cell_clip=clip, proj_clip=clip)
        with torch.no_grad():
            for p in layer.parameters():
                p.mul_(2)  # large enough that the clips bite
        layer = layer.to(device)
        x = torch.randn(3, 6, 5, device=device, requires_grad=True)
        h0 = torch.randn(3, 4, device=device, requires_grad=True)
        c0 = torch.randn(3, 7, device=device, requires_grad=True)
        upstream = torch.randn(3, 6, 4, device=device)
        results = []
        for kernel in (windows, dense):
            for tensor in (x, h0, c0, *layer.parameters()):
                tensor.grad = None
            out, (h, c) = kernel(layer, x, (h0, c0))
            assert out.is_contiguous()  # as the next layer's dropout draws its mask in memory order
            ((out * upstream).sum() + h.sum() + 2 * c.sum()).backward()
            grads = [t.grad.clone() for t in (x, h0, c0, *layer.parameters())]
            results.append([out.detach(), h.detach(), c.detach(), *grads])
        for a, b in zip(*results):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_the_packed_loop_trains_as_the_dense_loop(device):
    """Gradients through the packed rows (the training loop's hand-written backward) against
    autograd through the fixed-shape loop: inputs and every parameter, rows of unequal lengths,
    clipped and not, the final states' gradients included."""
    torch.manual_seed(0)
    lengths = torch.tensor([4, 9, 1, 6])
    valid = torch.arange(9)[None, :] < lengths[:, None]
    for clip in (None, 1.0):
        lstm = DirectionalLSTM(5, 7, 5, num_layers=2, cell_clip=clip, proj_clip=clip)
        with torch.no_grad():
            for p in lstm.parameters():
                p.mul_(2)  # large enough that the clips bite
        lstm = lstm.to(device)
        x = (torch.randn(4, 9, 5) * valid[:, :, None]).to(device).requires_grad_()
        upstream = torch.randn(4, 9, 5, device=device)
        gradients = []
        for kernel in ("packed", "dense"):
            lstm.zero_grad()
            x.grad = None
            if kernel == "packed":
                outputs, states = lstm(x, lengths.to(device))
            else:
                outputs, states = lstm(x, lengths.to(device), fixed_shapes=True)
            loss = (outputs[-1] * upstream).sum() + outputs[0].sum()
            (loss + sum(h.sum() + 2 * c.sum() for h, c in states)).backward()
            gradients.append([x.grad.clone()] + [p.grad.clone() for p in lstm.parameters()])
        for a, b in zip(*gradients):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_the_packed_loop_gives_gradients_to_its_initial_states():
    """From given states (a stateful biLM that trains): autograd through the one loop
    (``lstm_kernels.packed_layer``) gives the states' gradients and the weights' of float64
    autograd through a loop written out here, the weights used step by step."""
    from spacy_elmo.nn import lstm_kernels
    from spacy_elmo.nn.lstm import ClippedLSTM

    torch.manual_seed(0)
    layer = ClippedLSTM(3, 6, 4, cell_clip=0.8, proj_clip=0.8).double()
    batch_sizes = [4, 4, 3, 1]
    x = torch.randn(sum(batch_sizes), 3, dtype=torch.float64, requires_grad=True)
    state = (torch.randn(4, 4, dtype=torch.float64, requires_grad=True), torch.randn(4, 6, dtype=torch.float64, requires_grad=True))
    upstream = torch.randn(sum(batch_sizes), 4, dtype=torch.float64)
    products = lstm_kernels.float_products(layer)
    output, (h_n, c_n) = lstm_kernels.packed_layer(layer, products, x, batch_sizes, state)
    ((output * upstream).sum() + h_n.sum() + c_n.sum()).backward()
    weights = (layer.weight_ih_l0, layer.weight_hh_l0, layer.weight_hr_l0)
    got = [x.grad, state[0].grad, state[1].grad, *(w.grad for w in weights)]

    def reference(*inputs):
        x, h0, c0, w_ih, w_hh, w_hr = inputs
        x_gates = x @ w_ih.t() + layer.bias_ih_l0 + layer.bias_hh_l0
        h, c, start, outs, ends_h, ends_c = h0, c0, 0, [], [], []
        for n in batch_sizes:
            if n < h.shape[0]:
                ends_h.append(h[n:])
                ends_c.append(c[n:])
                h, c = h[:n], c[:n]
            out, c = layer.cell()(x_gates[start : start + n] + h @ w_hh.t(), c)
            h = layer.clip_output(out @ w_hr.t())
            outs.append(h)
            start += n
        h_n = torch.cat([h] + ends_h[::-1])
        c_n = torch.cat([c] + ends_c[::-1])
        return (torch.cat(outs) * upstream).sum() + h_n.sum() + c_n.sum()

    inputs = [t.detach().requires_grad_() for t in (x, *state, *weights)]
    reference(*inputs).backward()
    for a, b in zip(got, inputs):
        torch.testing.assert_close(a, b.grad, rtol=1e-9, atol=1e-10)


def test_the_fused_cell_is_the_eager_cell_with_its_gradients_where_the_clips_bite(device):
    """``ClippedLSTM.cell(fused=True)`` (compiled: one kernel each way) gives the eager
    cell's outputs and gradients, from a given cell state and from zeros, with values large
    enough that the cell clip bites on about half the entries, after a layer of another size and
    clip ran it without gradients (as the training loop's forward does)."""
    from spacy_elmo.nn.lstm import ClippedLSTM

    torch.manual_seed(0)
    with torch.no_grad():
        other = ClippedLSTM(4, 32, 16, cell_clip=3.0).to(device)
        other.cell(fused=True)(torch.randn(4, 128, device=device), torch.randn(4, 32, device=device), activations=True)
    layer = ClippedLSTM(4, 6, 3, cell_clip=0.5, proj_clip=0.5).to(device)
    for c_given in (True, False):
        gates = (torch.randn(5, 24, device=device) * 3).requires_grad_()
        c = torch.randn(5, 6, device=device).requires_grad_() if c_given else None
        results = []
        for fused in (False, True):
            out, c_new = layer.cell(fused)(gates, c)
            inputs = [gates] + ([c] if c is not None else [])
            grads = torch.autograd.grad((out * 1.7).sum() + (c_new * 0.3).sum(), inputs)
            results.append((out.detach(), c_new.detach(), grads))
        (out, c_new, grads), (out_f, c_new_f, grads_f) = results
        assert (c_new.abs() == 0.5).float().mean() > 0.2  # the clip bites
        torch.testing.assert_close(out_f, out, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c_new_f, c_new, rtol=1e-5, atol=1e-6)
        for g_f, g in zip(grads_f, grads):
            torch.testing.assert_close(g_f, g, rtol=1e-5, atol=1e-6)


def test_the_wavefront_runs_and_trains_as_the_layer_by_layer_windows(device):
    """``wavefront=True`` over windows: each layer's step t reads the layer below's step t only (on
    CUDA, each layer on a stream of its own); the outputs, final states and gradients are those
    of layer after layer, from given states, with dropout masks and clips that bite."""
    from spacy_elmo.nn.lstm import dropout_masks

    torch.manual_seed(0)
    lstm = DirectionalLSTM(5, 12, 6, num_layers=2, cell_clip=0.5, proj_clip=0.5).to(device)
    with torch.no_grad():
        for p in lstm.parameters():
            p.mul_(3)
    x = torch.randn(3, 7, 5, device=device, requires_grad=True)
    states = [(torch.randn(3, 6, device=device), torch.randn(3, 12, device=device)) for _ in range(2)]
    masks = dropout_masks(lstm, 3, 7, 0.3, x)
    results = []
    for wavefront in (False, True):
        outputs, finals = lstm(x, None, states, masks, wavefront=wavefront)
        loss = outputs[-1].square().sum() + outputs[0].sum() + sum(h.sum() + c.sum() for h, c in finals)
        grads = torch.autograd.grad(loss, [x, *lstm.parameters()])
        results.append([*(y.detach() for y in outputs), *(t.detach() for f in finals for t in f), *grads])
    assert (results[0][3].abs() == 0.5).any()  # the cell clip bites
    for other in results[1:]:
        for a, b in zip(results[0], other):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


def _autocast_windows(
    lstm: DirectionalLSTM, wavefront: bool, device: torch.device, x: torch.Tensor, weight_cache: bool
) -> list:
    """bf16 windows through the wavefront or the first layer's dense loop: the output and the
    gradients of its squares."""
    with precision_context("bf16", device, weight_cache=weight_cache):
        if wavefront:
            top = lstm(x, None, wavefront=True)[0][-1]
        else:
            top, _ = lstm_kernels.dense_layer(lstm.layers[0], x, None)
        grads = torch.autograd.grad(top.float().square().sum(), [x, *lstm.parameters()], allow_unused=True)
    return [top.detach(), *(g for g in grads if g is not None)]


def test_the_recorded_loops_cast_each_weight_once_whatever_the_window(device):
    """A CUDA graph's recording runs autocast without its weight cache (``precision_context(...,
    weight_cache=False)``), and a transposed weight is no leaf, which the cache keeps anyway: the
    dense loop and the wavefront cast each weight once themselves (``lstm_kernels.float_products``),
    so the casts do not grow with the window (they were a cast per weight and time step, and as
    many casts of the gradients back). The outputs and gradients are those of eager autocast."""
    if not runs_on("bf16", device):
        pytest.skip(f"bf16 does not run on {device}")
    torch.manual_seed(0)
    lstm = DirectionalLSTM(5, 12, 6, num_layers=2, cell_clip=0.5, proj_clip=0.5).to(device)
    for wavefront in (False, True):
        run = functools.partial(_autocast_windows, lstm, wavefront, device)
        # A weight's shape, or its transpose's; no activation of these sizes has one.
        weights = [list(p.shape)[::order] for p in lstm.parameters() if p.dim() == 2 for order in (1, -1)]
        casts = []
        for steps in (3, 9):
            x = torch.randn(3, steps, 5, device=device, requires_grad=True)
            with torch.profiler.profile(record_shapes=True) as prof:
                run(x, weight_cache=False)  # forward and backward
            casts.append(sum(e.name == "aten::_to_copy" and e.input_shapes[0] in weights for e in prof.events()))
        assert 0 < casts[0] == casts[1], casts
        recorded, cached = run(x, weight_cache=False), run(x, weight_cache=True)
        assert recorded[0].dtype == torch.bfloat16
        for a, b in zip(recorded, cached):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_the_recorded_loops_backward_never_fills_a_whole_window_per_step(device):
    """The dense loop and the wavefront take the window's input products apart once
    (``unbind``): their backward stacks the steps' gradients, where indexing each step would
    have made every step's gradient a zero-filled window-sized tensor and summed them."""
    torch.manual_seed(0)
    lstm = DirectionalLSTM(5, 12, 6, num_layers=2, cell_clip=0.5, proj_clip=0.5).to(device)
    x = torch.randn(3, 9, 5, device=device, requires_grad=True)
    window = [3, 9, 4 * 12]  # the input products of a whole window
    for wavefront in (False, True):
        with torch.profiler.profile(record_shapes=True) as prof:
            if wavefront:
                top = lstm(x, None, wavefront=True)[0][-1]
            else:
                top, _ = lstm_kernels.dense_layer(lstm.layers[0], x, None)
            top.square().sum().backward()
        fills_and_sums = [
            e.name for e in prof.events()
            if e.name in ("aten::zero_", "aten::fill_", "aten::add_", "aten::add") and e.input_shapes[:1] == [window]
        ]  # fmt: skip
        assert fills_and_sums == [], fills_and_sums
