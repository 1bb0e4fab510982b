"""Early stopping on held-out perplexity: ``[training] patience`` (docs/reference/pretraining-config.md,
[training]). Its state is rebuilt from ``metrics.jsonl`` on
``--resume``, so a resumed run stops where the uninterrupted one would have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .metrics import read_metrics


@dataclass
class EarlyStopping:
    """The best held-out perplexity so far, where it was reached, and the evaluations since."""

    patience: int
    best: float = math.inf
    best_step: Optional[int] = None
    since_best: int = 0

    def update(self, step: int, perplexity: float) -> bool:
        """Record an evaluation; whether it is the best so far (its weights are the ones to keep)."""
        if perplexity < self.best:
            self.best, self.best_step, self.since_best = perplexity, step, 0
            return True
        self.since_best += 1
        return False

    @property
    def exhausted(self) -> bool:
        """``patience`` evaluations in a row without a lower perplexity: the run stops."""
        return self.since_best >= self.patience

    @classmethod
    def from_metrics(cls, patience: int, metrics_file: Path) -> "EarlyStopping":
        """The state after the evaluations ``metrics_file`` records (none: a fresh state)."""
        state = cls(patience)
        for record in read_metrics(metrics_file):
            if "dev_ppl" in record:
                state.update(record["step"], record["dev_ppl"])
        return state

    def message(self, step: int) -> str:
        return (
            f"Step {step}: held-out perplexity has not fallen for {self.patience} evaluations; "
            f"stopped, keeping step {self.best_step}'s weights (perplexity {self.best:.2f})"
        )

    def record(self, step: int) -> dict:
        """The metrics line that says the run stopped early, and which evaluation it kept."""
        return {"step": step, "early_stop": True, "best_step": self.best_step, "best_dev_ppl": self.best}
