"""The layer mix on Thinc arrays (``spacy_elmo.layers.mix``), checked against autograd of the
PyTorch ``ScalarMix`` (an independent implementation of the same formula)."""

from __future__ import annotations

import numpy as np
import torch
from thinc.api import NumpyOps

from spacy_elmo import ScalarMix
from spacy_elmo.layers.mix import scalar_mix, softmax_scale_backprop


def test_mix_and_its_gradients_match_torch_autograd():
    ops = NumpyOps()
    rng = np.random.default_rng(0)
    layers = [rng.normal(size=(3, n, 4)).astype(np.float32) for n in (2, 5)]
    d_mixed = [rng.normal(size=(n, 4)).astype(np.float32) for n in (2, 5)]
    s, gamma = np.array([0.3, -1.0, 0.5], dtype=np.float32), 1.7

    weights = ops.softmax(s)
    mixed, backprop = scalar_mix(ops, weights, gamma, layers)
    d_scale, d_layers = backprop(d_mixed)
    d_s, d_gamma = softmax_scale_backprop(weights, gamma, d_scale)

    mix = ScalarMix(3, initial_weights=s.tolist(), initial_gamma=gamma)
    for doc_layers, d, ours, d_ours in zip(layers, d_mixed, mixed, d_layers):
        h = torch.tensor(doc_layers, requires_grad=True)
        out = mix(h)
        np.testing.assert_allclose(ours, out.detach().numpy(), rtol=1e-5, atol=1e-6)
        out.backward(torch.tensor(d))
        np.testing.assert_allclose(d_ours, h.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d_s, mix.scalar_parameters.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(d_gamma, float(mix.gamma.grad), rtol=1e-4)


def test_fixed_weights_mix_is_the_weighted_sum():
    """What the pipe writes to doc._.elmo: gamma * sum_j w_j h_j with its own weights."""
    ops = NumpyOps()
    layers = [np.arange(24, dtype=np.float32).reshape(3, 2, 4)]
    (mixed,), _ = scalar_mix(ops, ops.asarray1f([0.0, 0.0, 1.0]), 2.0, layers)
    np.testing.assert_array_equal(mixed, 2.0 * layers[0][2])
