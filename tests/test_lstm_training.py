"""The training loop (``spacy_elmo.nn.lstm_training``): one LSTM layer as one autograd node with
its backward written out, checked against numerical gradients and against autograd through the
step loop (``lstm_kernels.packed_layer``, which autograd differentiates op by op)."""

from __future__ import annotations

import pytest
import torch

from spacy_elmo.nn import lstm_kernels
from spacy_elmo.nn.lstm import ClippedLSTM
from spacy_elmo.nn.lstm_training import packed_training_loop

#: Rows running at each step: rows of unequal lengths (5, 4, 4, 3, 1 steps), sorted.
BATCH_SIZES = [5, 4, 4, 3, 1]
#: Windows: every row every step (their recurrent inputs are read without a copy).
WINDOWS = [5, 5, 5, 5, 5]


def _layer(clip, dtype=torch.float64) -> ClippedLSTM:
    torch.manual_seed(0)
    layer = ClippedLSTM(3, 6, 4, cell_clip=clip, proj_clip=clip).to(dtype)
    with torch.no_grad():
        for p in layer.parameters():
            p.mul_(2)  # large enough that the clips bite
    return layer


@pytest.mark.parametrize("clip", [None, 0.3])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("batch_sizes", [BATCH_SIZES, WINDOWS], ids=["unequal rows", "windows"])
def test_gradients_equal_numerical_gradients(clip, with_state, batch_sizes):
    """torch.autograd.gradcheck (float64 central differences) of the outputs and the final states
    with respect to the inputs, the initial states and every parameter."""
    layer = _layer(clip)
    n = sum(batch_sizes)
    x = torch.randn(n, 3, dtype=torch.float64, requires_grad=True)
    state = [torch.randn(5, size, dtype=torch.float64, requires_grad=True) for size in (4, 6)] if with_state else []


    def run(x, *tensors):
        # ``tensors``: the state, then the layer's own parameters, which gradcheck perturbs in
        # place and differentiates by, as the layer reads them
        output, (h_n, c_n) = packed_training_loop(layer, x, batch_sizes, tuple(tensors[: len(state)]) or None)
        return output, h_n, c_n

    assert torch.autograd.gradcheck(run, [x, *state, *layer.parameters()], eps=1e-6, atol=1e-5)
    if clip is not None:
        with torch.no_grad():  # the clips bite: what the masks of the backward are for
            output, (_, c_n) = packed_training_loop(layer, x, batch_sizes, tuple(state) or None)
        assert float(output.abs().max()) == pytest.approx(clip) and float(c_n.abs().max()) == pytest.approx(clip)


def _clipped_case(clip):
    """A seeded layer with weights large enough that the clips bite, 12 packed rows of up to 29
    steps, given states and an upstream gradient."""
    torch.manual_seed(1)
    layer = ClippedLSTM(16, 32, 8, cell_clip=clip, proj_clip=clip)
    with torch.no_grad():
        for p in layer.parameters():
            p.mul_(4)  # large enough that the clips bite
    lengths = sorted(torch.randint(1, 30, (12,)).tolist(), reverse=True)
    batch_sizes = [sum(1 for length in lengths if length > t) for t in range(lengths[0])]
    x = torch.randn(sum(batch_sizes), 16, requires_grad=True)
    state = (torch.randn(12, 8, requires_grad=True), torch.randn(12, 32, requires_grad=True))
    upstream = torch.randn(sum(batch_sizes), 8)
    return layer, batch_sizes, x, state, upstream


@pytest.mark.parametrize("clip", [None, 1.0])
def test_it_trains_as_autograd_through_the_step_loop_in_float32(clip):
    """Outputs, final states and every gradient against autograd through ``packed_layer`` (an
    independent derivation: torch's derivatives of each op) at a shape with many steps and
    rows, from given states, the final states' gradients included."""
    layer, batch_sizes, x, state, upstream = _clipped_case(clip)
    results = []
    for kernel in ("training", "step loop"):
        for t in (x, *state, *layer.parameters()):
            t.grad = None
        if kernel == "training":
            output, (h_n, c_n) = packed_training_loop(layer, x, batch_sizes, state)
        else:
            products = lstm_kernels.float_products(layer)
            output, (h_n, c_n) = lstm_kernels.packed_layer(layer, products, x, batch_sizes, state)
        ((output * upstream).sum() + h_n.sum() - 2 * c_n.sum()).backward()
        grads = [t.grad.clone() for t in (x, *state, *layer.parameters())]
        results.append([output.detach(), h_n.detach(), c_n.detach(), *grads])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    if clip is not None:  # what the masks of the backward are for
        assert float(results[0][0].abs().max()) == clip and float(results[0][2].abs().max()) == clip


def test_run_packed_trains_on_it_only_where_gradients_are_wanted():
    """``ClippedLSTM.run_packed``: the training loop with gradients, under bf16 autocast too; the
    one loop without them; autograd through the one loop inside ``torch.compile`` only."""
    layer = _layer(None, torch.float32)
    data = torch.randn(sum(BATCH_SIZES), 3)
    batch_sizes = torch.tensor(BATCH_SIZES)
    output, _ = layer.run_packed(data, batch_sizes, None)
    assert type(output.grad_fn).__name__ == "_PackedLayerBackward"
    with torch.no_grad():
        expected, _ = layer.run_packed(data, batch_sizes, None)
    torch.testing.assert_close(output.detach(), expected, rtol=1e-5, atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = layer.run_packed(data, batch_sizes, None)
    assert type(output.grad_fn).__name__ == "_PackedLayerBackward" and output.dtype == torch.bfloat16


def test_under_bf16_autocast_it_trains_as_autograd_through_the_step_loop():
    """Under bf16 autocast (the GPU step's precision; here on the CPU) the training loop runs its
    products in bf16 as autograd's would: the same outputs and final states, and gradients that
    differ from autograd's by at most two bf16 epsilons of each tensor's largest magnitude (the
    two sum the same bf16 products in another order) and lie as close to float32's as autograd's
    do (within one epsilon), with clips that bite, from given states."""
    layer, batch_sizes, x, state, upstream = _clipped_case(1.0)

    def run(kernel: str, autocast: bool) -> list:
        tensors = (x, *state, *layer.parameters())
        for t in tensors:
            t.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if kernel == "training":
                output, (h_n, c_n) = packed_training_loop(layer, x, batch_sizes, state)
            else:
                products = lstm_kernels.float_products(layer)
                output, (h_n, c_n) = lstm_kernels.packed_layer(layer, products, x, batch_sizes, state)
        ((output.float() * upstream).sum() + h_n.float().sum() - 2 * c_n.float().sum()).backward()
        return [output.detach(), h_n.detach(), c_n.detach()] + [t.grad.clone() for t in tensors]

    exact, training, autograd = run("training", False), run("training", True), run("step loop", True)
    eps = torch.finfo(torch.bfloat16).eps
    for a, b in zip(training[:3], autograd[:3]):
        assert torch.equal(a, b)
    for want, got, theirs in zip(exact[3:], training[3:], autograd[3:]):
        scale = float(want.abs().max())
        assert float((got - theirs).abs().max()) <= 2 * eps * scale
        assert float((got - want).abs().max()) <= float((theirs - want).abs().max()) + eps * scale
    assert float(exact[0].abs().max()) == 1.0  # the projection clip bites


def test_a_frozen_layer_passes_gradients_to_its_inputs_only():
    """Weights that need no gradient (a frozen LSTM under a trained encoder) get none, and the
    inputs' gradient is the one a trained layer's run gives them."""
    layer = _layer(0.5)
    x = torch.randn(sum(BATCH_SIZES), 3, dtype=torch.float64, requires_grad=True)
    output, _ = packed_training_loop(layer, x, BATCH_SIZES, None)
    output.sum().backward()
    trained = x.grad.clone()
    x.grad = None
    layer.zero_grad(set_to_none=True)
    layer.requires_grad_(False)
    output, _ = packed_training_loop(layer, x, BATCH_SIZES, None)
    output.sum().backward()
    assert all(p.grad is None for p in layer.parameters())
    torch.testing.assert_close(x.grad, trained, rtol=0, atol=0)
