"""A softmax fitted to a frozen biLM, as ``adapt`` does first for a source without one.

With the biLM frozen, the softmax is a multinomial logistic regression on fixed features: the
biLM's top-layer outputs are computed once (no dropout, both directions) and the softmax alone
is trained on them, the held-out perplexity computed on the held-out text's outputs, so no
update and no evaluation runs the biLM again. The weights start at zero, the learning rate
falls linearly to 0 at the last update, and the best evaluation's softmax is kept. The bias
stays at zero: the top layer already tells how frequent each word is (the biLM learned it on its
own text), while a bias fitted to a small text's counts overfits them: a worse held-out
perplexity, and a whole-biLM step after it that forgets more (docs/results/adapt/speed).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ..files import replacing
from ..nn.softmax import LMSoftmax
from .corpus import SequenceReader
from .early_stopping import EarlyStopping
from .evaluate import EvalResult, length_sorted_batches
from .metrics import MetricsLog
from .model import BiLMLanguageModel, make_batch
from .run_files import SOFTMAX_NAME
from .stop import StopRequest
from .trainer import TrainingInterrupted
from .vocab import Vocab


@dataclass
class Predictions:
    """What a frozen biLM's LMs predict from: top-layer outputs (N, dim), their targets (N,),
    and which are the backward LM's (N,) bool."""

    hidden: torch.Tensor
    targets: torch.Tensor
    backward: torch.Tensor

    def __len__(self) -> int:
        return self.targets.shape[0]


@dataclass
class FitSettings:
    """The fit's recipe: ``batch`` predictions per update (AdamW on the weights, ``learning_rate``
    falling linearly to 0 at ``max_steps``, ``weight_decay``: the rows of rare words otherwise
    fit their few contexts), an evaluation every ``eval_every`` updates,
    stopped after ``patience`` evaluations without a lower held-out perplexity; ``seed`` orders
    the updates."""

    learning_rate: float
    batch: int
    max_steps: int
    eval_every: int
    patience: int
    seed: int
    weight_decay: float = 0.0


@torch.no_grad()
def top_layer_outputs(model: BiLMLanguageModel, vocab: Vocab, reader: SequenceReader, batch_tokens: int) -> Predictions:
    """The predictions of both LMs of ``model`` (in eval mode: no dropout) over ``reader``'s text."""
    model.eval()
    hidden, targets, backward = [], [], []
    for sequences in length_sorted_batches(reader, batch_tokens):
        batch_hidden, batch_targets, _ = model.predictions(make_batch(sequences, vocab))
        hidden.append(batch_hidden)
        targets.append(batch_targets)
        backward.append(torch.arange(len(batch_targets)) >= len(batch_targets) // 2)  # the forward LM's first
    return Predictions(torch.cat(hidden), torch.cat(targets), torch.cat(backward))


@torch.no_grad()
def held_out(softmax: LMSoftmax, predictions: Predictions, batch: int, source: object) -> EvalResult:
    """Held-out perplexity of ``softmax`` on ``predictions`` (scored ``batch`` at a time)."""
    nll = torch.cat(
        [
            softmax.full_nll(predictions.hidden[start : start + batch], predictions.targets[start : start + batch])
            for start in range(0, len(predictions), batch)
        ]
    ).double()
    backward = predictions.backward
    sums = torch.stack([nll[~backward].sum(), nll[backward].sum(), backward.sum().double()])
    return EvalResult.from_sums(sums, source)


def zero_start(softmax: LMSoftmax, targets: torch.Tensor) -> torch.Tensor:
    """Zero ``softmax``'s weights and bias (every word equally likely). Returns the ids of the
    words ``targets`` never shows, whose rows the fit keeps equal."""
    with torch.no_grad():
        softmax.weight.zero_()
        softmax.bias.zero_()
    return (torch.bincount(targets, minlength=softmax.vocab_size) == 0).nonzero().squeeze(1)


def fit_softmax(
    softmax: LMSoftmax,
    train: Predictions,
    heldout: Predictions,
    settings: FitSettings,
    run_dir: Path,
    show_progress: bool = True,
) -> EarlyStopping:
    """Fit ``softmax``'s weights to ``train`` from zero, keeping the evaluation on ``heldout``
    with the lowest perplexity; its evaluations go to ``run_dir``'s metrics.jsonl (with the fit's
    time so far), the kept softmax to its softmax.safetensors, written whole last. Raises
    ``TrainingInterrupted`` on Ctrl-C (the fit keeps nothing: it starts over)."""
    # The rows of words the training text never shows start equal and stay so: scored as one.
    softmax.tie_rows(zero_start(softmax, train.targets))
    softmax.bias.requires_grad_(False)  # it stays at zero
    log = _EvaluationLog(heldout, settings, run_dir, show_progress, time.perf_counter())
    try:
        best = _train_weights(softmax, train, settings, log, show_progress)
    finally:  # the softmax as it was given, however the fit ends
        softmax.tie_rows(None)
        softmax.bias.requires_grad_(True)
    softmax.load_state_dict(best)
    with replacing(run_dir / SOFTMAX_NAME) as temporary:
        save_file(best, str(temporary))
    return log.stopping


def _train_weights(
    softmax: LMSoftmax, train: Predictions, settings: FitSettings, log: _EvaluationLog, show_progress: bool
) -> Dict[str, torch.Tensor]:
    """The fit's updates of ``softmax.weight`` and its evaluations; the best evaluation's softmax."""
    optimizer = torch.optim.AdamW([softmax.weight], lr=settings.learning_rate, weight_decay=settings.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / settings.max_steps)
    best = log.evaluate(softmax, 0)
    stop = StopRequest(distributed=False, speak=show_progress)
    bar = tqdm(total=settings.max_steps, unit="step", desc="softmax fit", dynamic_ncols=True, disable=not show_progress)
    with stop.handling_ctrl_c():
        for step, rows in enumerate(_batches(len(train), settings), start=1):
            loss = softmax.full_nll(train.hidden[rows], train.targets[rows]).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            bar.update(1)
            if stop.requested:
                bar.close()
                raise TrainingInterrupted("interrupted during the softmax fit, which starts over on --resume")
            if step % settings.eval_every == 0 or step == settings.max_steps:
                best = log.evaluate(softmax, step) or best
                bar.set_postfix(dev_ppl=f"{log.latest:.1f}")  # the evaluation just made
                if log.stopping.exhausted:
                    break
    bar.close()
    return best


def _batches(n: int, settings: FitSettings) -> Iterator[torch.Tensor]:
    """Row ids of ``settings.max_steps`` updates of ``settings.batch`` predictions: the ``n``
    predictions in a seeded random order, pass after pass."""
    generator = torch.Generator().manual_seed(settings.seed)
    order = torch.randperm(n, generator=generator)
    start = 0
    for _ in range(settings.max_steps):
        if start + settings.batch > n:
            order, start = torch.randperm(n, generator=generator), 0
        yield order[start : start + settings.batch]
        start += settings.batch


class _EvaluationLog:
    """The fit's held-out evaluations: scored, written to metrics.jsonl, said, and tracked by
    early stopping (``started``: the clock reading the fit's time counts from)."""

    def __init__(self, heldout: Predictions, settings: FitSettings, run_dir: Path, speak: bool, started: float) -> None:
        self.heldout, self.batch, self.started = heldout, settings.batch, started
        self.stopping = EarlyStopping(settings.patience)
        self.metrics = MetricsLog(run_dir, is_main=True)
        self.echo: Callable[[str], None] = tqdm.write if speak else lambda line: None
        self.latest = math.inf

    def evaluate(self, softmax: LMSoftmax, step: int) -> Optional[Dict[str, torch.Tensor]]:
        """Score the held-out predictions and log it; the softmax's weights if it is the best so
        far; after ``patience`` evaluations without a better one, the stop, logged."""
        result = held_out(softmax, self.heldout, self.batch, "the held-out text")
        self.latest = result.ppl_average
        seconds = time.perf_counter() - self.started
        self.metrics.write(
            {
                "step": step,
                "seconds": seconds,
                "dev_tokens": result.tokens,
                "dev_ppl_forward": result.ppl_forward,
                "dev_ppl_backward": result.ppl_backward,
                "dev_ppl": result.ppl_average,
            }
        )
        self.echo(
            f"Step {step}: held-out perplexity {result.ppl_average:.2f} (forward {result.ppl_forward:.2f}, "
            f"backward {result.ppl_backward:.2f})"
        )
        best = self.stopping.update(step, result.ppl_average)
        if self.stopping.exhausted:
            self.metrics.write({**self.stopping.record(step), "seconds": seconds})
            self.echo(self.stopping.message(step))
        return {name: value.detach().clone() for name, value in softmax.state_dict().items()} if best else None
