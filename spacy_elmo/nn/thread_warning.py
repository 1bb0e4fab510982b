"""The one warning the package gives about PyTorch's thread count, once per process: left at
PyTorch's default, ``threads = "auto"`` falls back to intra-op threads that run far slower beside a
busy process (docs/results/threads.md). The package never sets the count behind the user's back, so
it says so once, naming the fix.
"""

from __future__ import annotations

import threading
import warnings

import torch


class CompetingThreadsWarning(UserWarning):
    """PyTorch runs its ops on several threads where the biLM would split a batch itself."""


_warned = False
_lock = threading.Lock()


def warn_if_threads_compete(threads: object, split: int, device: torch.device) -> bool:
    """Warn once per process when ``threads = "auto"`` fell back to PyTorch's intra-op threads where
    one op thread would let the biLM split over ``split`` cores; whether it warned."""
    global _warned
    n_torch = torch.get_num_threads()
    if _warned or threads != "auto" or device.type != "cpu" or n_torch == 1 or split < 2:
        return False
    with _lock:
        if _warned:
            return False
        _warned = True
    warnings.warn(
        f"spacy_elmo: PyTorch runs its ops on {n_torch} threads in this process, so the elmo pipe "
        f"(threads = \"auto\") runs on them instead of its forward and backward LSTMs side by "
        f"side on {split} cores. Beside another busy process those threads wait for each other "
        "at every op: the pipe, `spacy train` and `spacy evaluate` measured many times slower "
        "than with one op thread (docs/guide/using.md, \"One PyTorch op thread\"). Fix: call "
        "torch.set_num_threads(1) once at the start of your program, or run commands with "
        "OMP_NUM_THREADS=1 (e.g. OMP_NUM_THREADS=1 python -m spacy train ...). To keep "
        "PyTorch's threads and silence this, set the elmo model block's threads to a number.",
        CompetingThreadsWarning,
        stacklevel=2,
    )
    return True
