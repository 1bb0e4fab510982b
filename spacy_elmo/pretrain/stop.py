"""Ctrl-C in a pretraining run: finish the step, save a checkpoint, stop; a second Ctrl-C aborts.

Under torchrun the ranks must stop at the same step (one that stopped alone would wait forever in
the others' next collective): each rank's request travels with the loss sums it flushes, and only
the request agreed there counts.
"""

from __future__ import annotations

import signal
from typing import ContextManager

from tqdm import tqdm

from ..stopping import on_signals


class StopRequest:
    """Whether this process got Ctrl-C, and whether some rank did by the last flush."""

    def __init__(self, distributed: bool, speak: bool) -> None:
        self.distributed = distributed
        self.speak = speak
        self.requested = False  # this process got Ctrl-C
        self.agreed = False  # some rank got it by the last flush: every rank stops after it

    @property
    def stop(self) -> bool:
        return self.agreed if self.distributed else self.requested

    def agree(self, any_rank_requested: bool) -> None:
        self.agreed = self.agreed or any_rank_requested

    def handling_ctrl_c(self) -> ContextManager[None]:
        """SIGINT sets the request while the block runs (``stopping.on_signals``: an ignored
        SIGINT stays ignored)."""
        return on_signals([signal.SIGINT], self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        if self.speak:
            tqdm.write("Ctrl-C: finishing this step and saving a checkpoint (again to abort)")
