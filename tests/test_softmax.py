"""The LM output layer (``spacy_elmo.nn.softmax``): the full softmax's NLL, the log-uniform
sampler, and the sampled softmax as an estimate of the full one."""

from __future__ import annotations

import math

import numpy as np
import torch

from spacy_elmo.nn.softmax import LMSoftmax, LogUniformSampler


def test_full_nll_is_minus_log_softmax_of_the_target():
    torch.manual_seed(0)
    softmax = LMSoftmax(vocab_size=7, dim=3)
    hidden, targets = torch.randn(4, 3), torch.tensor([0, 6, 2, 2])
    logits = (hidden @ softmax.weight.T + softmax.bias).detach().double().numpy()
    expected = -(logits[range(4), targets] - np.log(np.exp(logits).sum(1)))
    np.testing.assert_allclose(softmax.full_nll(hidden, targets).detach().numpy(), expected, rtol=1e-5)


def test_log_uniform_sampler_favours_frequent_ids():
    sampler = LogUniformSampler(1000)
    ids = sampler.sample(20000, torch.device("cpu"), torch.Generator().manual_seed(0))
    assert ids.min() >= 0 and ids.max() < 1000
    # P(0) = log 2 / log 1001 ~ 0.10
    assert abs(float((ids == 0).float().mean()) - math.log(2) / math.log(1001)) < 0.01
    expected = math.log(5 * math.log(2) / math.log(1001))
    assert abs(float(sampler.log_expected_count(torch.tensor([0]), 5)) - expected) < 1e-6


def test_sampled_nll_leaves_accidental_hits_out_of_the_normaliser():
    """A vocabulary of one word: every negative is the target itself, so the normaliser holds
    the true word alone and the loss is 0 (finite, not NaN)."""
    softmax = LMSoftmax(vocab_size=1, dim=3)
    hidden = torch.randn(4, 3, requires_grad=True)
    loss = softmax.sampled_nll(hidden, torch.zeros(4, dtype=torch.long), 16, torch.Generator().manual_seed(0))
    assert torch.equal(loss, torch.zeros(4))
    loss.sum().backward()
    assert torch.isfinite(hidden.grad).all()


def test_sampled_nll_is_a_nonnegative_loss_per_target():
    torch.manual_seed(0)
    softmax = LMSoftmax(vocab_size=50, dim=4)
    hidden, targets = torch.randn(6, 4), torch.randint(0, 50, (6,))
    loss = softmax.sampled_nll(hidden, targets, 10, torch.Generator().manual_seed(1))
    assert loss.shape == (6,) and (loss >= 0).all()
