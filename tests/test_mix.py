"""The layer mix, written once (``spacy_elmo.nn.scalar_mix``): the ``ScalarMix`` module, the
pipe's fixed mix and a listener's learned mix (``layers/mix_head.py``) all run it. Expected values
are the formula written out in NumPy (Peters et al. 2018, eq. 1; AllenNLP's ``do_layer_norm``)."""

from __future__ import annotations

import numpy as np
import torch
from thinc.api import fix_random_seed

from spacy_elmo import ScalarMix
from spacy_elmo.layers import mix_head as head_module
from spacy_elmo.layers.mix_head import mix_head
from spacy_elmo.nn import scalar_mix


def _softmax(s):
    e = np.exp(s - s.max())
    return e / e.sum()


def test_mix_is_the_formula():
    rng = np.random.default_rng(0)
    layers = rng.normal(size=(3, 5, 4)).astype(np.float32)
    s, gamma = np.array([0.3, -1.0, 0.5], dtype=np.float32), 1.7
    mix = ScalarMix(3, initial_weights=s.tolist(), initial_gamma=gamma)
    expected = gamma * np.tensordot(_softmax(s), layers, axes=(0, 0))
    np.testing.assert_allclose(mix(torch.from_numpy(layers)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_layer_norm_is_zero_mean_unit_variance_per_layer_and_leaves_empty_alone():
    rng = np.random.default_rng(1)
    scales = np.array([5.0, 1.0, 0.3], dtype=np.float32)[:, None, None]
    layers = torch.from_numpy((rng.normal(size=(3, 6, 4)) * scales + 2.0).astype(np.float32))
    normed = scalar_mix.normalize_layers(layers).numpy()
    np.testing.assert_allclose(normed.mean(axis=(1, 2)), 0.0, atol=1e-5)
    np.testing.assert_allclose(normed.var(axis=(1, 2)), 1.0, rtol=1e-4)
    empty = scalar_mix.normalize_layers(torch.zeros(3, 0, 4))
    assert empty.shape == (3, 0, 4) and not torch.isnan(empty).any()


def test_fixed_weights_mix_is_the_weighted_sum():
    """What the pipe writes to doc._.elmo: gamma * sum_j w_j h_j with its own weights."""
    layers = torch.arange(24, dtype=torch.float32).reshape(3, 2, 4)
    mixed = scalar_mix.weighted_sum(layers, 2.0 * torch.tensor([0.0, 0.0, 1.0]))
    assert torch.equal(mixed, 2.0 * layers[2])


def test_a_listener_head_runs_the_one_mix_and_learns_its_weights(monkeypatch):
    """The head calls nn.scalar_mix (no second copy) and its gradients for s, gamma
    and the layers are autograd's through ScalarMix with the same values, per doc."""
    calls = []
    monkeypatch.setattr(head_module, "weighted_sum", lambda *a: calls.append(1) or scalar_mix.weighted_sum(*a))
    fix_random_seed(0)
    for layer_norm in (False, True):
        head = mix_head(width=5, layer_norm=layer_norm)
        head.set_dim("nL", 3)
        head.set_dim("nI", 4)
        head.initialize()
        rng = np.random.default_rng(2)
        s, gamma = rng.normal(size=3).astype("f"), 1.3
        head.set_param("s", s.copy())
        head.set_param("gamma", np.asarray([gamma], dtype="f"))
        layers = [rng.normal(size=(3, n, 4)).astype("f") for n in (2, 0, 3)]
        mixed, backprop = head_module._mix(head, layers, is_train=True)
        d_mixed = [rng.normal(size=(n, 4)).astype("f") for n in (2, 0, 3)]
        d_layers = backprop(d_mixed)
        reference = ScalarMix(3, initial_weights=s.tolist(), initial_gamma=gamma, layer_norm=layer_norm)
        for x, y, d, d_x in zip(layers, mixed, d_mixed, d_layers):
            h = torch.tensor(x, requires_grad=True)
            out = reference(h)
            np.testing.assert_allclose(y, out.detach().numpy(), rtol=1e-5, atol=1e-6)
            out.backward(torch.from_numpy(d))
            np.testing.assert_allclose(d_x, h.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(head.get_grad("s"), reference.scalar_parameters.grad.numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(head.get_grad("gamma"), reference.gamma.grad.numpy(), rtol=1e-4)
    assert len(calls) == 2
