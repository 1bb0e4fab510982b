"""The LM output layer (``spacy_elmo.nn.softmax``): the full softmax's NLL, the log-uniform
sampler, and the sampled softmax as an estimate of the full one."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from spacy_elmo.nn.softmax import LMSoftmax, LogUniformSampler, accidental_hits


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


def _reference_sampled_nll(softmax, hidden, targets, sampled):
    """bilm-tf's sampled softmax written out with autograd ops in float64: logsumexp over the
    true logit and the negatives' logits, each corrected by -log(expected count), accidental hits
    left out."""
    w, b = softmax.weight.double(), softmax.bias.double()
    n = len(sampled)
    log_q = lambda ids: softmax.sampler.log_expected_count(ids, n).double()  # noqa: E731
    true = (hidden * w[targets]).sum(1) + b[targets] - log_q(targets)
    negatives = hidden @ w[sampled].T + b[sampled] - log_q(sampled)
    negatives = negatives.masked_fill(targets[:, None] == sampled[None, :], float("-inf"))
    return torch.logsumexp(torch.cat([true[:, None], negatives], 1), 1) - true


def test_sampled_nll_and_its_gradients_equal_the_formula_with_autograd():
    """The fused loss (its gradient worked out in the forward) against autograd through the
    formula in float64, with many accidental hits (a small vocabulary)."""
    torch.manual_seed(0)
    softmax = LMSoftmax(vocab_size=40, dim=5)
    torch.nn.init.normal_(softmax.bias)
    hidden = torch.randn(30, 5, requires_grad=True)
    targets = torch.randint(0, 40, (30,))
    upstream = torch.rand(30)  # the loss's rows weighted unequally

    loss = softmax.sampled_nll(hidden, targets, 64, torch.Generator().manual_seed(4))
    (loss * upstream).sum().backward()
    got = [loss.detach(), hidden.grad, softmax.weight.grad, softmax.bias.grad]

    sampled = softmax.sampler.sample(64, hidden.device, torch.Generator().manual_seed(4))
    assert (targets[:, None] == sampled[None, :]).sum() > 30  # the case that matters is there
    h64 = hidden.detach().double().requires_grad_()
    softmax.zero_grad()
    want = _reference_sampled_nll(softmax, h64, targets, sampled)
    (want * upstream.double()).sum().backward()
    expected = [want.detach(), h64.grad, softmax.weight.grad, softmax.bias.grad]
    for name, a, b in zip(("loss", "hidden", "weight", "bias"), got, expected):
        torch.testing.assert_close(a.double(), b.double(), rtol=1e-5, atol=1e-5, msg=name)


def test_accidental_hits_are_every_equal_pair():
    targets = torch.tensor([3, 0, 3, 9, 1])
    sampled = torch.tensor([3, 1, 3, 7, 0, 3])
    rows, columns = accidental_hits(targets, sampled)
    pairs = sorted(zip(rows.tolist(), columns.tolist()))
    assert pairs == sorted(map(tuple, (targets[:, None] == sampled[None, :]).nonzero().tolist()))
    assert len(pairs) == 8


def test_sampled_nll_backward_twice_is_refused():
    """Its backward reuses the saved logits, so a second backward of the same graph would be
    wrong: it says so instead."""
    softmax = LMSoftmax(vocab_size=20, dim=4)
    hidden = torch.randn(6, 4, requires_grad=True)
    loss = softmax.sampled_nll(hidden, torch.randint(0, 20, (6,)), 8).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward runs once per forward"):
        loss.backward()


def test_sampled_nll_under_bf16_autocast_is_close_to_float32():
    torch.manual_seed(0)
    softmax = LMSoftmax(vocab_size=300, dim=16)
    hidden, targets = torch.randn(50, 16), torch.randint(0, 300, (50,))
    exact = softmax.sampled_nll(hidden, targets, 100, torch.Generator().manual_seed(0))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = softmax.sampled_nll(hidden, targets, 100, torch.Generator().manual_seed(0))
    assert low.dtype == torch.float32
    torch.testing.assert_close(low, exact, rtol=0.03, atol=0.05)


def test_two_losses_before_one_backward_do_not_share_the_kept_logits():
    """The logits' memory is lent to one loss at a time: a second loss before the first's
    backward gets its own, so both gradients stay right; after a backward it is lent again."""
    torch.manual_seed(0)
    softmax = LMSoftmax(vocab_size=60, dim=5)
    hidden = [torch.randn(20, 5, requires_grad=True) for _ in range(2)]
    targets = torch.randint(0, 60, (20,))
    losses = [softmax.sampled_nll(h, targets, 30, torch.Generator().manual_seed(k)) for k, h in enumerate(hidden)]
    (losses[0].sum() + losses[1].sum()).backward()
    for k, h in enumerate(hidden):
        sampled = softmax.sampler.sample(30, h.device, torch.Generator().manual_seed(k))
        h64 = h.detach().double().requires_grad_()
        _reference_sampled_nll(softmax, h64, targets, sampled).sum().backward()
        torch.testing.assert_close(h.grad.double(), h64.grad, rtol=1e-5, atol=1e-6)
    kept = softmax._workspace.take((20, 31), hidden[0])
    assert kept is not None and softmax._workspace.take((20, 31), hidden[0]) is None


def test_tied_rows_score_and_train_as_the_full_softmax():
    """Equal rows scored as one (plus log K) give the full softmax's losses and gradients, each
    tied row the same gradient (so training keeps them equal), a tied word its own probability;
    float32 rounding of sums over 40 columns is the tolerance."""
    torch.manual_seed(0)
    full, tied = LMSoftmax(vocab_size=40, dim=6), LMSoftmax(vocab_size=40, dim=6)
    rows = torch.arange(25, 40)
    with torch.no_grad():
        full.weight[rows] = full.weight[25].clone()
        full.bias[rows] = 0.3
    tied.load_state_dict(full.state_dict())
    tied.tie_rows(rows)
    hidden = torch.randn(30, 6)
    targets = torch.cat([torch.randint(0, 25, (27,)), torch.tensor([25, 31, 39])])
    want, got = full.full_nll(hidden, targets), tied.full_nll(hidden, targets)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    want[:27].sum().backward()
    got[:27].sum().backward()
    for name in ("weight", "bias"):
        torch.testing.assert_close(getattr(tied, name).grad, getattr(full, name).grad, rtol=1e-5, atol=1e-6)
    assert bool((tied.weight.grad[rows] == tied.weight.grad[25]).all())


def test_tie_rows_refuses_rows_that_differ():
    softmax = LMSoftmax(vocab_size=10, dim=3)
    with pytest.raises(ValueError, match="the 4 rows are not equal"):
        softmax.tie_rows(torch.arange(4))
