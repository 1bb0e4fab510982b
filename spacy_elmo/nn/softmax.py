"""The language-model output layer shared by the forward and backward LMs.

``full_nll`` scores every word (exact perplexity, small vocabularies). ``sampled_nll`` is the
sampled softmax of Jean et al. (2015) as bilm-tf trained it: the true word and ``n_samples``
negatives drawn from a log-uniform (Zipfian) distribution over a frequency-sorted vocabulary, each
logit corrected by ``-log(expected count)``, accidental hits of the true word removed.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Tuple

import torch
from torch import nn


class LogUniformSampler:
    """Draws word ids with P(k) = log((k + 2) / (k + 1)) / log(V + 1), k = 0 .. V - 1.

    Assumes ids are sorted by decreasing frequency, as Zipf's law then roughly matches P.
    """

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._log_range = math.log(vocab_size + 1)

    def sample(
        self, n: int, device: torch.device, generator: Optional[torch.Generator] = None
    ) -> torch.Tensor:
        """(n,) int64 ids, drawn with replacement by inverting the CDF."""
        u = torch.rand(n, generator=generator, device=generator.device if generator else device)
        ids = torch.exp(u * self._log_range).long() - 1
        return ids.clamp_(0, self.vocab_size - 1).to(device)

    def log_expected_count(self, ids: torch.Tensor, n: int) -> torch.Tensor:
        """log(n * P(id)): the correction subtracted from each sampled logit."""
        ids = ids.double()
        p = torch.log((ids + 2.0) / (ids + 1.0)) / self._log_range
        return torch.log(n * p).float()


_MASKED = -1e30


class LMSoftmax(nn.Module):
    """logits = h W^T + b over the vocabulary. weight (vocab, dim), bias (vocab,).

    With ``row_sparse_gradients`` on, the sampled softmax reads the rows it uses (the targets and
    the negatives of the step) as one detached leaf, so backward yields gradients of those rows
    only; :meth:`publish_row_gradients` then hands them to ``weight.grad`` / ``bias.grad`` as
    sparse tensors (bilm-tf's IndexedSlices), instead of a dense vocab x dim gradient per step.
    """

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab_size, dim) / math.sqrt(dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.sampler = LogUniformSampler(vocab_size)
        self.row_sparse_gradients = False
        self._used_rows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    def full_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Exact negative log-likelihood per target. hidden (N, dim), targets (N,) -> (N,)."""
        logits = torch.addmm(self.bias, hidden, self.weight.t())
        return nn.functional.cross_entropy(logits.float(), targets, reduction="none")

    def sampled_nll(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        n_samples: int,
        generator: Optional[torch.Generator] = None,
    ) -> torch.Tensor:
        """Sampled-softmax loss per target (an estimate of ``full_nll`` used for training).

        One set of ``n_samples`` negatives is shared by all N targets of the batch.
        """
        sampled = self.sampler.sample(n_samples, hidden.device, generator)
        rows = self._rows(torch.cat([targets, sampled]))
        n = targets.shape[0]
        true_logit = (hidden * rows[:n, :-1]).sum(-1) + rows[:n, -1]
        true_logit = (true_logit - self.sampler.log_expected_count(targets, n_samples)).float()
        # The correction of the sampled logits is folded into their bias (one pass less over the
        # N x n_samples logits), and the normaliser over [true, sampled] is taken as
        # logaddexp(true, logsumexp(sampled)) instead of over a concatenated copy.
        bias = rows[n:, -1] - self.sampler.log_expected_count(sampled, n_samples)
        sampled_logits = torch.addmm(bias, hidden, rows[n:, :-1].t()).float()
        # Accidental hits of the true word leave the normaliser: a large finite value (exp
        # underflows to 0) rather than -inf, so that a row whose every sample is a hit stays
        # finite whatever logsumexp's backward makes of an all -inf row.
        accidental = targets[:, None] == sampled[None, :]
        sampled_logits = sampled_logits.masked_fill_(accidental, _MASKED)
        return torch.logaddexp(true_logit, torch.logsumexp(sampled_logits, dim=1)) - true_logit

    def _rows(self, ids: torch.Tensor) -> torch.Tensor:
        """[weight | bias] rows of ``ids``: (len(ids), dim + 1)."""
        if not (self.row_sparse_gradients and torch.is_grad_enabled()):
            return torch.cat([self.weight[ids], self.bias[ids, None]], dim=1)
        unique, inverse = torch.unique(ids, return_inverse=True)
        leaf = torch.cat([self.weight.detach()[unique], self.bias.detach()[unique, None]], dim=1)
        leaf.requires_grad_()
        self._used_rows = (unique, leaf)
        return leaf[inverse]

    def publish_row_gradients(self, gather: Optional[RowGather] = None) -> None:
        """After backward: set ``weight.grad`` and ``bias.grad`` to sparse gradients of the rows
        the last sampled-softmax call used. ``gather`` (data parallel) returns the rows and
        gradients of every rank, averaged as DistributedDataParallel averages dense gradients."""
        if self._used_rows is None:
            return
        ids, leaf = self._used_rows
        self._used_rows = None
        values = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
        if gather is not None:
            ids, values = gather(ids, values)
        shape = (self.vocab_size,)
        self.weight.grad = _sparse(ids, values[:, :-1], shape + (values.shape[1] - 1,))
        self.bias.grad = _sparse(ids, values[:, -1], shape)


#: (row ids, row gradients) of this process -> the same of all processes, averaged.
RowGather = Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]


def _sparse(ids: torch.Tensor, values: torch.Tensor, shape: Tuple[int, ...]) -> torch.Tensor:
    """A coalesced sparse COO gradient (repeated ids summed)."""
    grad = torch.sparse_coo_tensor(ids[None], values, shape, check_invariants=False)
    return grad.coalesce()
