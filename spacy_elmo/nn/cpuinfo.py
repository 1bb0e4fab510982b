"""What ``/proc/cpuinfo`` says about the CPU (Linux; nothing elsewhere): its feature flags, by
which the int8 products choose their kernels, and its model, which benchmarks record."""

from __future__ import annotations

from typing import Optional


def cpuinfo(key: str) -> Optional[str]:
    """The value of the first ``key`` line (``flags``, ``model name``); None without one."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
