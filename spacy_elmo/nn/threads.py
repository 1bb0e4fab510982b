"""Threads for the biLM: the ``"auto"`` count, the cores this process may use, the small pool that
runs independent pieces of a batch side by side, so that they meet once per batch instead of at
every op, and ``one_op_thread``, which gives the threads that run those pieces one PyTorch op
thread each without writing the process's count (docs/guide/using.md, "One PyTorch op thread").

``torch.set_num_threads`` is the process's: it sets the count of every thread started after it, the
pool other libraries share and MKL-DNN's cache, so nothing here calls it during a pipe's call
(``torch_threads`` sets it for spans a command owns). The runtimes under PyTorch keep a count per
thread (OpenMP's, MKL's local one): ``one_op_thread`` sets those for the calling thread and puts
them back, and the pool's workers keep one for good.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

import torch

T = TypeVar("T")
#: Workers that run the pieces of a batch beside the caller's thread (``run_side_by_side``);
#: created on first use, grown when a caller asks for more, dropped in a forked child.
_pool: Optional[ThreadPoolExecutor] = None
_pool_workers = 0
_pool_lock = threading.Lock()


@functools.cache
def _thread_counts() -> Optional[Tuple[Any, Any, Any]]:
    """OpenMP's per-thread count (set, get) in this process and MKL's local one (set, through its
    Fortran interface: the count by reference; None without MKL), or None where PyTorch's OpenMP
    runtime cannot be reached (Windows)."""
    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    try:
        process = ctypes.CDLL(None)
        openmp = (process.omp_set_num_threads, process.omp_get_max_threads)
    except (OSError, AttributeError, TypeError):
        return None
    try:
        mkl = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")).mkl_set_num_threads_local_
    except (OSError, AttributeError):
        mkl = None
    return (*openmp, mkl)


def _set_op_threads(openmp: int, mkl: int) -> Tuple[int, int]:
    """This thread's OpenMP and MKL counts (MKL's 0: the process's); returns the ones before."""
    set_openmp, get_openmp, set_mkl = _thread_counts()
    torch.get_num_threads()  # PyTorch sets a thread's counts at its first op: before ours
    before = get_openmp()
    set_openmp(openmp)
    return before, set_mkl(ctypes.byref(ctypes.c_int(mkl))) if set_mkl is not None else 0


@contextlib.contextmanager
def one_op_thread() -> Iterator[None]:
    """PyTorch's ops on one thread in the calling thread within the block, its counts back after;
    no other thread's, nor the process's. Nothing where the runtimes cannot be reached."""
    if _thread_counts() is None:
        yield
        return
    before = _set_op_threads(1, 1)
    try:
        yield
    finally:
        _set_op_threads(*before)


def _one_thread_after_fork() -> None:
    """One PyTorch thread in a forked child before anything runs: GNU OpenMP's pool does not survive
    ``fork``, and the child would hang in its first parallel op."""
    global _pool, _pool_workers, _pool_lock
    # The parent's workers do not exist here, and its lock may have been held at the fork.
    _pool, _pool_workers, _pool_lock = None, 0, threading.Lock()
    torch.set_num_threads(1)


@functools.cache
def prepare_forked_children() -> None:
    """Have every child this process forks from now on start on one PyTorch thread (once): spaCy's
    ``nlp.pipe(n_process=N)`` forks to run a pipe; called when an elmo pipe is made."""
    if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
        os.register_at_fork(after_in_child=_one_thread_after_fork)


Threads = Union[int, str]


#: What ``threads = "auto"`` uses at most: the two LSTM directions side by side, the split that
#: kept its speed on a shared 2-core machine (docs/results/threads.md).
AUTO_THREADS = 2


def resolve_threads(threads: Threads) -> int:
    """The pieces ``threads`` stands for; ``"auto"``: ``min(AUTO_THREADS, usable_cores())`` where
    each piece can run its ops on one thread (``one_op_thread``) or the process runs one, else 1."""
    if threads == "auto":
        return auto_threads() if _thread_counts() is not None or torch.get_num_threads() == 1 else 1
    return threads


def auto_threads() -> int:
    """What "auto" counts where it applies: the usable cores, at most ``AUTO_THREADS``."""
    return min(AUTO_THREADS, usable_cores())


def command_threads(threads: Threads) -> int:
    """The thread count of a command that owns its process (pretrain, adapt): "auto" is
    ``auto_threads()``, whatever torch runs with now (unlike the pipe's ``resolve_threads``)."""
    return auto_threads() if threads == "auto" else int(threads)


def usable_cores() -> int:
    """Cores this process may use: CPU affinity or cgroup quota, the smaller; at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _cgroup_cpu_quota() -> Optional[float]:
    """CPUs allowed by the cgroup (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), None if unlimited."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota_us = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period_us = int(f.read())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def run_side_by_side(tasks: Sequence[Callable[[], T]]) -> List[T]:
    """Run independent pieces at once, the first on the calling thread, the others on a persistent
    pool; returns their results in order. PyTorch releases the GIL in its ops, so pieces use
    separate cores. Grad mode, autocast and the int8 switch are per thread: a task that needs them
    enters them itself. Workers never wait on each other, so concurrent callers share the pool
    without deadlock."""
    if len(tasks) <= 1:
        return [task() for task in tasks]
    pool = _worker_pool(len(tasks) - 1)
    futures = [pool.submit(contextvars.copy_context().run, task) for task in tasks[1:]]
    try:
        first = tasks[0]()
    finally:
        rest = [future.result() for future in futures]
    return [first] + rest


def _worker_pool(n_workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_workers
    with _pool_lock:
        if _pool is None or _pool_workers < n_workers:
            old = _pool
            prepare_forked_children()
            initializer = (lambda: _set_op_threads(1, 1)) if _thread_counts() is not None else None
            _pool = ThreadPoolExecutor(n_workers, thread_name_prefix="spacy_elmo", initializer=initializer)
            _pool_workers = n_workers
            if old is not None:
                old.shutdown(wait=False)  # its queued tasks still run
        return _pool


@contextlib.contextmanager
def torch_threads(n_threads: Optional[int]) -> Iterator[int]:
    """A span with ``n_threads`` PyTorch threads (None: unchanged), restored after; yields the
    count. For spans of a process a command owns, never one call of a pipe."""
    before = torch.get_num_threads()
    if n_threads is None or n_threads == before:
        yield before
        return
    torch.set_num_threads(n_threads)
    try:
        yield n_threads
    finally:
        torch.set_num_threads(before)
