"""The language-model output layer shared by the forward and backward LMs.

``full_nll`` scores every word (exact perplexity, small vocabularies). ``sampled_nll`` is the
sampled softmax of Jean et al. (2015) as bilm-tf trained it: the true word and ``n_samples``
negatives drawn from a log-uniform (Zipfian) distribution over a frequency-sorted vocabulary, each
logit corrected by ``-log(expected count)``, accidental hits of the true word removed.
"""

from __future__ import annotations

import math
from typing import Callable, List, Optional, Tuple

import torch
from torch import nn

from .precision import autocast_disabled, autocast_dtype_now, compiling


class LogUniformSampler:
    """Draws ids with P(k) = log((k + 2) / (k + 1)) / log(V + 1), for ids sorted by decreasing
    frequency (Zipf's law then roughly matches P)."""

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


class LMSoftmax(nn.Module):
    """logits = h W^T + b over the vocabulary; weight (vocab, dim), bias (vocab,).

    With ``row_sparse_gradients``, backward yields gradients of the rows the sampled softmax used
    only; :meth:`publish_row_gradients` hands them to ``weight.grad`` / ``bias.grad`` as sparse
    tensors (bilm-tf's IndexedSlices) instead of a dense vocab x dim gradient per step."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab_size, dim) / math.sqrt(dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.sampler = LogUniformSampler(vocab_size)
        self.row_sparse_gradients = False
        #: Keep the row ids each sampled loss with gradients reads, for ``take_used_rows``.
        self.record_rows = False
        self._recorded: List[torch.Tensor] = []
        self._used_rows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
        self._workspace = LogitsWorkspace()
        self._tied: Optional[TiedRows] = None

    @property
    def vocab_size(self) -> int:
        return self.weight.shape[0]

    def tie_rows(self, rows: Optional[torch.Tensor]) -> None:
        """Score the equal rows ``rows`` (ids) as one, in ``full_nll``; None: each its own again.

        K equal rows give K equal logits, whose share of the normaliser is one logit plus log K:
        the products and the softmax then run over the other rows and that one. Training keeps
        such rows equal while none of them is a target (each gets the same gradient: the
        shared row's, spread evenly), so the result is the full softmax's, up to rounding. The
        rows of the words a text never shows start equal in the softmax ``adapt`` fits from
        zero (``pretrain/softmax_fit.py``)."""
        if rows is None or len(rows) < 2:
            self._tied = None
            return
        rows = rows.to(self.weight.device)
        with torch.no_grad():
            table = torch.cat([self.weight[rows], self.bias[rows, None]], dim=1)
            if not bool((table == table[:1]).all()):
                raise ValueError(f"tie_rows: the {len(rows):,} rows are not equal")
        self._tied = TiedRows(rows, self.vocab_size)

    def full_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Exact negative log-likelihood per target. hidden (N, dim), targets (N,) -> (N,).
        The sampled softmax's loss with every word as a negative: its N x V logits are passed
        over in place, on memory kept from step to step (the N x V tensors of a log-softmax and
        its backward, made anew each step, cost more than the products)."""
        tied = self._tied
        if tied is None:
            table = torch.cat([self.weight, self.bias[:, None]], dim=1)
            every_word = torch.arange(self.vocab_size, device=hidden.device)
            return self._loss(hidden, table[targets], table, targets, every_word)
        kept = torch.cat([self.weight[tied.kept], self.bias[tied.kept, None]], dim=1)
        shared = torch.cat([self.weight[tied.rows].mean(0), self.bias[tied.rows].mean()[None] + tied.log_count])
        table = torch.cat([kept, shared[None]])
        columns = tied.column_of[targets]
        nll = self._loss(hidden, table[columns], table, columns, torch.arange(table.shape[0], device=hidden.device))
        # A tied row's word has the shared column's probability over K.
        return nll + (columns == tied.shared_column) * tied.log_count

    def sampled_nll(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        n_samples: int,
        generator: Optional[torch.Generator] = None,
    ) -> torch.Tensor:
        """Sampled-softmax loss per target. One set of ``n_samples`` negatives is shared by the
        batch's N targets, drawn from ``generator`` (None: torch's default, as a compiled or graphed
        step needs). Shapes are fixed by N and ``n_samples``, except the CPU's eager search for
        accidental hits."""
        sampled = self.sampler.sample(n_samples, hidden.device, generator)
        ids = torch.cat([targets, sampled])
        if self.record_rows and torch.is_grad_enabled():
            self._recorded.append(ids)
        rows = self._rows(ids)
        # Each logit's correction -log(expected count) goes into its row's bias column.
        rows[:, -1] -= self.sampler.log_expected_count(ids, n_samples).to(rows.dtype)
        n = targets.shape[0]
        return self._loss(hidden, rows[:n], rows[n:], targets, sampled)

    def _loss(
        self, hidden: torch.Tensor, true_rows: torch.Tensor, table: torch.Tensor, targets: torch.Tensor, ids: torch.Tensor
    ) -> torch.Tensor:
        lent_elsewhere = self._workspace.lent
        loss = _SoftmaxLoss.apply(hidden, true_rows, table, targets, ids, self._workspace)
        if not loss.requires_grad and not lent_elsewhere:  # no backward will hand it back
            self._workspace.release()
        return loss

    def _rows(self, ids: torch.Tensor) -> torch.Tensor:
        """[weight | bias] rows of ``ids``: (len(ids), dim + 1), a new tensor."""
        if not (self.row_sparse_gradients and torch.is_grad_enabled()):
            return torch.cat([self.weight[ids], self.bias[ids, None]], dim=1)
        unique, inverse = torch.unique(ids, return_inverse=True)
        leaf = torch.cat([self.weight.detach()[unique], self.bias.detach()[unique, None]], dim=1)
        leaf.requires_grad_()
        self._used_rows = (unique, leaf)
        return leaf[inverse]

    def take_used_rows(self) -> Optional[torch.Tensor]:
        """The row ids the sampled losses read since the last call (repeats kept: a fixed number
        per batch), or None; only with ``record_rows``."""
        if not self._recorded:
            return None
        rows, self._recorded = torch.cat(self._recorded), []
        return rows

    def forget_used_rows(self) -> None:
        """Drop the rows of losses whose step never ran (an exception, a custom loop)."""
        self._recorded = []

    def publish_row_gradients(self, gather: Optional[RowGather] = None) -> None:
        """After backward: sparse ``weight.grad``/``bias.grad`` of the rows the last sampled softmax
        used; ``gather`` (data parallel): every rank's rows, averaged as DDP averages."""
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


class TiedRows:
    """Which rows of a softmax are scored as one (``LMSoftmax.tie_rows``): the ``rows`` tied, the
    rows ``kept`` as they are, and each row's column among the kept rows and the shared one."""

    def __init__(self, rows: torch.Tensor, vocab_size: int) -> None:
        tied = torch.zeros(vocab_size, dtype=torch.bool, device=rows.device)
        tied[rows] = True
        self.rows = rows
        self.kept = (~tied).nonzero().squeeze(1)
        self.shared_column = len(self.kept)
        self.column_of = torch.full((vocab_size,), self.shared_column, dtype=torch.long, device=rows.device)
        self.column_of[self.kept] = torch.arange(len(self.kept), device=rows.device)
        self.log_count = math.log(len(rows))


#: (row ids, row gradients) of this process -> the same of all processes, averaged.
RowGather = Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]


def _sparse(ids: torch.Tensor, values: torch.Tensor, shape: Tuple[int, ...]) -> torch.Tensor:
    """A coalesced sparse COO gradient (repeated ids summed)."""
    grad = torch.sparse_coo_tensor(ids[None], values, shape, check_invariants=False)
    return grad.coalesce()


class LogitsWorkspace:
    """The sampled softmax's N x (1 + S) logits' memory, kept from step to step on the CPU (a fresh
    tensor each step costs page faults: docs/results/implementation.md). ``take`` lends it to one loss until
    that loss's backward gives it back; anything else meanwhile gets a fresh tensor."""

    def __init__(self) -> None:
        self._buffer: Optional[torch.Tensor] = None
        self._lent = False

    def take(self, shape: Tuple[int, int], like: torch.Tensor) -> Optional[torch.Tensor]:
        """A float32 CPU tensor of ``shape`` on the kept memory, or None (allocate one)."""
        if self._lent or like.dtype != torch.float32 or like.device.type != "cpu" or compiling():
            return None
        numel = shape[0] * shape[1]
        if self._buffer is None or self._buffer.numel() < numel:
            self._buffer = torch.empty(numel)
        self._lent = True
        return self._buffer[:numel].view(shape)

    @property
    def lent(self) -> bool:
        return self._lent

    def release(self) -> None:
        self._lent = False


class _SoftmaxLoss(torch.autograd.Function):
    """``logsumexp([true; sampled]) - true`` per row, its gradient worked out in the forward so that
    the N x (1 + S) logits, the one large tensor, are passed over a handful of times in place
    (the full softmax: every word sampled once).

    Args (forward): hidden (N, dim); true_rows (N, dim + 1) and sampled_rows (S, dim + 1), the
    [weight | corrected bias] rows; targets (N,), sampled (S,) ids; a ``LogitsWorkspace`` or None.
    Returns the (N,) loss; under autocast the products run in its dtype, the softmax in float32."""

    @staticmethod
    def forward(ctx, hidden, true_rows, sampled_rows, targets, sampled, workspace):
        compute = autocast_dtype_now(hidden.device.type) or true_rows.dtype
        n = hidden.shape[0]
        hidden1 = torch.cat([hidden.to(compute), hidden.new_ones(n, 1, dtype=compute)], dim=1)
        true_rows = true_rows.to(compute)
        with autocast_disabled(hidden.device.type):
            # Row 0 of the table is zeros: column 0 of the product is left for the true logit.
            table = torch.cat([sampled_rows.new_zeros(1, sampled_rows.shape[1]), sampled_rows]).to(compute)
            out = None if workspace is None else workspace.take((n, table.shape[0]), hidden1)
            ctx.workspace = workspace if out is not None else None
            logits = torch.mm(hidden1, table.t()) if out is None else torch.mm(hidden1, table.t(), out=out)
            logits[:, 0] = (hidden1 * true_rows).sum(1)
            _mask_hits(logits, targets, sampled)
            if logits.dtype == torch.float32:
                log_p = torch.log_softmax(logits, dim=1, out=logits)
            else:
                log_p = torch.log_softmax(logits, dim=1, dtype=torch.float32)
        ctx.save_for_backward(hidden1, true_rows, table, log_p)
        ctx.consumed = False
        return -log_p[:, 0]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        if ctx.consumed:
            raise RuntimeError(
                "the sampled softmax's backward runs once per forward (it reuses its logits): "
                "compute the loss again instead of backward(retain_graph=True) twice"
            )
        ctx.consumed = True
        hidden1, true_rows, table, log_p = ctx.saved_tensors
        dim = hidden1.shape[1] - 1
        with autocast_disabled(hidden1.device.type):
            # d loss / d logits = softmax - one_hot(0): exp in place (the saved log-softmax is
            # not needed again).
            probs = log_p.exp_()
            probs[:, 0] -= 1.0
            probs = probs.to(hidden1.dtype)
            scaled = hidden1 * grad[:, None].to(hidden1.dtype)
            sampled_grad = torch.mm(probs.t(), scaled)[1:]
            true_grad = scaled * probs[:, :1]
            hidden_grad = None
            if ctx.needs_input_grad[0]:  # not for a frozen biLM's outputs
                hidden_grad = torch.mm(probs, table[:, :dim])  # the zero row: nothing from column 0
                hidden_grad = hidden_grad.addcmul_(probs[:, :1], true_rows[:, :dim]).mul_(grad[:, None])
        if ctx.workspace is not None:
            ctx.workspace.release()
            ctx.workspace = None
        return hidden_grad, true_grad, sampled_grad, None, None, None


def _mask_hits(logits: torch.Tensor, targets: torch.Tensor, sampled: torch.Tensor) -> None:
    """Set accidental hits (negative j == row i's target) of (N, 1 + S) logits to -inf: as index
    pairs on the CPU outside a compiled graph, else by a dense comparison."""
    if logits.device.type != "cpu" or compiling():
        logits[:, 1:].masked_fill_(targets[:, None] == sampled[None, :], float("-inf"))
    else:
        rows, columns = accidental_hits(targets, sampled)
        logits.index_put_((rows, columns + 1), torch.tensor(float("-inf"), dtype=logits.dtype))


def accidental_hits(targets: torch.Tensor, sampled: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(rows, columns) of every pair ``targets[row] == sampled[column]`` (a binary search each)."""
    ordered, order = torch.sort(sampled)
    first = torch.searchsorted(ordered, targets)
    counts = torch.searchsorted(ordered, targets, right=True) - first
    rows = torch.repeat_interleave(torch.arange(targets.shape[0], device=targets.device), counts)
    # the k-th hit of row i is negative order[first[i] + k]
    starts = torch.repeat_interleave(first - (counts.cumsum(0) - counts), counts)
    return rows, order[starts + torch.arange(rows.shape[0], device=rows.device)]
