"""What a pretraining run measures between two log lines, and where it writes it.

The steps' losses are summed on the device (``PendingSums``) and read back once per flush, so a
step never waits for the device; ``LogWindow`` turns the flushed sums into the log record;
``MetricsLog`` appends records to ``metrics.jsonl`` (rank 0 only); ``read_metrics`` reads them
back (the summary, early stopping on resume, adapt, the learning curve).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Dict, List, Tuple, Union

import srsly
import torch

from .run_files import METRICS_NAME


class PendingSums:
    """What the steps since the last flush summed on the device, and their count on the host."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.nll = torch.zeros(2, dtype=torch.float64, device=device)
        self.count = 0
        self.steps = 0

    def add(self, nll: torch.Tensor, count: int) -> None:
        self.nll += nll
        self.count += count
        self.steps += 1

    def take(self, stop: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(nll (2,), count (1,), stop (1,)) float64 on the device; starts over."""
        extra = torch.tensor([self.count, float(stop)], dtype=torch.float64).to(self.device)
        nll = self.nll
        self.nll = torch.zeros_like(nll)
        self.count, self.steps = 0, 0
        return nll, extra[:1], extra[1:]


class LogWindow:
    """Running training statistics between two log lines."""

    def __init__(self) -> None:
        self.restart_clock()
        self.nll = 0.0
        self.count = 0

    def restart_clock(self) -> None:
        """Start timing anew (after an evaluation or a checkpoint, which are no training time)."""
        self.start = time.perf_counter()
        self.timed_tokens = 0

    def add(self, nll: float, count: int) -> None:
        self.nll += nll
        self.count += count
        self.timed_tokens += count // 2

    def flush(self, step: int, tokens_seen: int, lr: float) -> Dict:
        """loss: mean NLL per prediction (of the sampled softmax when it is on, which is not a
        perplexity of the full model); tokens_per_s: predictions per direction per second."""
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        loss = self.nll / max(self.count, 1)
        record = {
            "step": step,
            "tokens": tokens_seen,
            "loss": loss,
            "ppl": math.exp(min(loss, 50.0)),
            "lr": lr,
            "tokens_per_s": self.timed_tokens / elapsed,
        }
        self.nll, self.count = 0.0, 0
        self.restart_clock()
        return record


class MetricsLog:
    """``metrics.jsonl`` of a run: one JSON record a line, written by rank 0 only."""

    def __init__(self, output_dir: Path, is_main: bool) -> None:
        self.path = Path(output_dir) / METRICS_NAME
        self.is_main = is_main

    def write(self, record: Dict) -> None:
        if not self.is_main:
            return
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")


def read_metrics(path: Union[str, Path]) -> List[Dict]:
    """The records of a ``metrics.jsonl`` (a run's folder or the file itself), in order; none
    for a run that has logged nothing yet. Blank lines are skipped."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_NAME
    return list(srsly.read_jsonl(path)) if path.is_file() else []
