"""The kit's clock and how it compares clocked runs: a stopwatch that waits for the GPU, and an
A/B's medians side by side with their ratios."""

from __future__ import annotations

import statistics
import time
from typing import Dict, Optional, Sequence, Tuple

import torch

from spacy_elmo.bench.report import ratio


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a clock reading covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """``with Stopwatch(device) as clock: ...`` then ``clock.seconds``; waits for the GPU."""

    def __init__(self, device: torch.device = torch.device("cpu")) -> None:
        self.device = device
        self.seconds = 0.0

    def __enter__(self) -> "Stopwatch":
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._start


def medians_and_ratios(
    runs: Dict[str, Sequence[float]], baseline: str
) -> Tuple[Dict[str, Optional[float]], Dict[str, Optional[float]]]:
    """An A/B's figures side by side: each name's median (None without runs) and its ratio to
    the median of ``baseline``."""
    medians = {name: statistics.median(values) if values else None for name, values in runs.items()}
    return medians, {name: ratio(median, medians[baseline]) for name, median in medians.items()}
