"""Clocks and peak memory, the same way for every benchmark.

Peak memory on the CPU is the resident set size (RSS) high-water mark of this process, measured
from a starting point: on Linux ``VmHWM`` in ``/proc/self/status`` is reset to the current RSS by
writing ``5`` to ``/proc/self/clear_refs``, so the peak of a block is ``VmHWM - VmRSS at its
start``. Where that reset is refused (not Linux, restricted kernels) the fallback is
``getrusage``'s ``ru_maxrss``, which never resets: only increases over the process's earlier peak
show, so the figure is a lower bound (``method`` says which was used). Benchmarks therefore run
each measured path in a fresh process (``spacy_elmo.bench.isolate``, for ``bench``'s cells and
the checkout's benchmarks): memory that an earlier path freed but the allocator kept cannot hide
a later path's peak.

On CUDA the peak is ``torch.cuda.max_memory_allocated`` minus the memory allocated at the start.
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Optional, Union

import torch

#: The benches' "MB" is 2**20 bytes (a MiB; docs/manual.md says so where it quotes them).
MB = 2**20


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


def proc_status_kb(field: str, pid: Union[int, str] = "self") -> Optional[int]:
    """``field`` (``VmRSS``, ``VmHWM``) of a process's ``/proc/PID/status`` in KiB; None where
    there is none (not Linux, the process gone)."""
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
