"""The layer mix on Thinc arrays (``spacy_elmo.layers.mix``), checked against autograd of the
PyTorch ``ScalarMix`` (an independent implementation of the same formula)."""

from __future__ import annotations

import numpy as np
import torch
from thinc.api import NumpyOps

from spacy_elmo import ScalarMix
from spacy_elmo.layers.mix import layer_norm, scalar_mix, softmax_scale_backprop


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


def test_layer_norm_mix_and_its_gradients_match_torch_autograd():
    """A listener's ``layer_norm`` mix against ``ScalarMix(layer_norm=True)`` on one doc at a
    time (its statistics pool the batch; ours are per doc, the same for a batch of one)."""
    ops = NumpyOps()
    rng = np.random.default_rng(1)
    # Layers of different scales and offsets, as the biLM's are.
    scales = np.array([5.0, 1.0, 0.3], dtype=np.float32)[:, None, None]
    layers = [(rng.normal(size=(3, n, 4)) * scales + 2.0).astype(np.float32) for n in (1, 6)]
    d_mixed = [rng.normal(size=(n, 4)).astype(np.float32) for n in (1, 6)]
    s, gamma = np.array([0.2, 0.4, -0.3], dtype=np.float32), 0.8

    weights = ops.softmax(s)
    normed, backprop_norm = layer_norm(ops, layers)
    mixed, backprop_mix = scalar_mix(ops, weights, gamma, normed)
    d_scale, d_normed = backprop_mix(d_mixed)
    d_layers = backprop_norm(d_normed)

    for doc_layers, d, ours, d_ours in zip(layers, d_mixed, mixed, d_layers):
        mix = ScalarMix(3, initial_weights=s.tolist(), initial_gamma=gamma, layer_norm=True)
        h = torch.tensor(doc_layers, dtype=torch.float64, requires_grad=True)
        out = mix.double()(h)
        np.testing.assert_allclose(ours, out.detach().numpy(), rtol=1e-4, atol=1e-5)
        out.backward(torch.tensor(d, dtype=torch.float64))
        np.testing.assert_allclose(d_ours, h.grad.numpy(), rtol=1e-3, atol=1e-5)
    # Normalised layers: zero mean, unit variance per doc and layer, whatever their scale.
    for y in normed:
        np.testing.assert_allclose(y.mean(axis=(1, 2)), 0.0, atol=1e-5)
        np.testing.assert_allclose(y.var(axis=(1, 2)), 1.0, rtol=1e-4)


def test_layer_norm_leaves_an_empty_doc_alone():
    ops = NumpyOps()
    empty = np.zeros((3, 0, 4), dtype=np.float32)
    (normed,), backprop = layer_norm(ops, [empty])
    assert normed.shape == (3, 0, 4) and not np.isnan(normed).any()
    assert backprop([empty])[0].shape == (3, 0, 4)
