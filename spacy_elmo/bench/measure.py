"""Peak memory and the order of rounds, the same way for every benchmark.

CPU peak: the RSS high-water mark from a starting point (Linux: ``VmHWM`` reset through
``/proc/self/clear_refs``; elsewhere ``ru_maxrss``, which never resets, so a lower bound; ``method``
says which). CUDA peak: ``torch.cuda.max_memory_allocated`` above the start.
"""

from __future__ import annotations

import resource
import sys
from typing import Callable, Dict, List, Optional, Sequence, TypeVar, Union

import torch

#: The benches' "MB" is 2**20 bytes (a MiB; docs/results/ says so where it quotes them).
MB = 2**20
K = TypeVar("K")
R = TypeVar("R")


def alternating(names: Sequence[K], rounds: int, run: Callable[[K, int], R]) -> Dict[K, List[R]]:
    """``run(name, round)`` for each of ``names`` in each of ``rounds`` rounds, the order reversed
    every other round, so that a machine whose load drifts favours none; each name's results."""
    runs: Dict[K, List[R]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            runs[name].append(run(name, round_))
    return runs


def proc_status_kb(field: str, pid: Union[int, str] = "self") -> Optional[int]:
    """``field`` of ``/proc/PID/status`` in KiB; None where there is none."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss_bytes() -> Optional[int]:
    kb = proc_status_kb("VmRSS")
    return None if kb is None else kb * 1024


def _reset_rss_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _ru_maxrss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


class PeakMemory:
    """Peak memory of a block beyond what was in use when it started.

    ``with PeakMemory(device) as peak: ...`` then ``peak.bytes`` (the increase), ``peak.total``
    (the absolute peak: RSS or CUDA allocated) and ``peak.method``.
    """

    def __init__(self, device: torch.device = torch.device("cpu")) -> None:
        self.device = device
        self.bytes = 0
        self.total = 0
        self.method = ""

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            self.method = "torch.cuda.max_memory_allocated"
            return self
        rss = current_rss_bytes()
        if rss is not None and _reset_rss_peak():
            self._start = rss
            self.method = "rss_hwm_reset"
        else:
            self._start = rss if rss is not None else _ru_maxrss_bytes()
            self.method = "ru_maxrss"
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.total = torch.cuda.max_memory_allocated(self.device)
        elif self.method == "rss_hwm_reset":
            self.total = (proc_status_kb("VmHWM") or 0) * 1024
        else:
            self.total = _ru_maxrss_bytes()
        self.bytes = max(0, self.total - self._start)

    @property
    def mb(self) -> float:
        return self.bytes / MB
