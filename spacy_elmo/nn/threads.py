"""Threads for the biLM: PyTorch's intra-op thread count for one block of work (restored after
it), the ``"auto"`` count, and the small pool that runs independent pieces of a batch (the two LSTM
directions, shards of the batch) side by side.

PyTorch starts as many OpenMP threads as the machine has cores. When other processes keep those
cores busy, its threads wait for each other at every parallel op: on a 2-core machine shared
with one other job, ``en_core_web_sm`` + elmo ran 25x slower with 2 threads than with 1. The pipe,
``embed``, ``demo`` and pretraining take a ``threads`` setting and enter this context, so the
caller's own torch setting is what it was after the call.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import multiprocessing
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, List, Optional, Sequence, TypeVar, Union

import torch

T = TypeVar("T")
_forked = False
#: Workers that run the pieces of a batch beside the caller's thread (``run_side_by_side``);
#: created on first use, grown when a caller asks for more, dropped in a forked child.
_pool: Optional[ThreadPoolExecutor] = None
_pool_workers = 0
_pool_lock = threading.Lock()


def _one_thread_after_fork() -> None:
    """In a child forked from this process, before anything else runs there: one PyTorch
    thread. GNU OpenMP's thread pool does not survive ``fork``: a child whose parent ever ran a
    parallel torch op (a matmul of the user's, a pipeline's weight load) hangs for good in its
    first parallel op unless it runs single-threaded. Setting it here, rather than when the pipe
    first runs, covers the child's every op, the lazy weight load included."""
    global _forked, _pool, _pool_workers, _pool_lock
    _forked = True
    # The parent's workers do not exist here, and its lock may have been held at the fork.
    _pool, _pool_workers, _pool_lock = None, 0, threading.Lock()
    torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_one_thread_after_fork)


Threads = Optional[Union[int, str]]


def check_threads(value: Threads, what: str) -> Threads:
    """``value`` if it is None, ``"auto"`` or a positive int, else a ValueError naming ``what``
    (the key)."""
    if value == "auto" and isinstance(value, str):
        return value
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(
            f"{what} must be a positive integer, \"auto\" or null (PyTorch's own setting), got {value!r}"
        )
    return value


#: What ``threads = "auto"`` uses at most: the two LSTM directions side by side, the split that
#: kept its speed on a shared 2-core machine (docs/manual.md, "Threads").
AUTO_THREADS = 2


def resolve_threads(threads: Threads) -> Optional[int]:
    """The thread count ``threads`` stands for: ``"auto"`` is ``min(AUTO_THREADS, usable_cores())``,
    and 1 in a worker of a multiprocessing pool (``nlp.pipe(n_process=N)`` spawned, a web
    server's spawned workers): its sibling workers share the same cores."""
    if threads == "auto":
        if multiprocessing.parent_process() is not None:
            return 1
        return min(AUTO_THREADS, usable_cores())
    return threads


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity (``taskset``, a container's cpuset) and the
    cgroup CPU quota (a Kubernetes CPU limit), whichever is smaller; at least 1."""
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
    """Run independent pieces of work at once: the first on the calling thread, the others on a
    persistent pool, each with single-threaded PyTorch ops; returns their results in order.

    PyTorch releases the GIL inside its ops (float and int8 products alike), so the pieces use
    separate cores; they meet once, at the end, instead of at every op as PyTorch's intra-op
    threads do (whose waits for a descheduled thread made 2 threads slower than 1 on a busy
    machine). The caller runs with one intra-op thread (``torch_threads(1)``); each worker sets
    its own (OpenMP's thread count is per thread). Grad mode, autocast and the int8 switch are per
    thread or per context: a task that needs them enters them itself (the biLM does). The
    workers run nothing but these tasks and never wait on each other, so concurrent callers (a
    web server's threads) share the pool without deadlock.
    """
    if len(tasks) <= 1:
        return [task() for task in tasks]
    pool = _worker_pool(len(tasks) - 1)
    futures = [pool.submit(contextvars.copy_context().run, _one_thread, task) for task in tasks[1:]]
    try:
        first = tasks[0]()
    finally:
        rest = [future.result() for future in futures]
    return [first] + rest


def _one_thread(task: Callable[[], T]) -> T:
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    return task()


def _worker_pool(n_workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_workers
    with _pool_lock:
        if _pool is None or _pool_workers < n_workers:
            old = _pool
            _pool = ThreadPoolExecutor(n_workers, thread_name_prefix="spacy_elmo")
            _pool_workers = n_workers
            if old is not None:
                old.shutdown(wait=False)  # its queued tasks still run
        return _pool


def threads_in_this_process(threads: Threads) -> Optional[int]:
    """``threads`` (``"auto"`` resolved), or 1 in a process forked from one that had imported this package
    (``nlp.pipe(n_process=2)`` with ``fork``, a web server forking its workers): its OpenMP pool
    is broken (see ``_one_thread_after_fork``), and workers should not compete for cores anyway.
    Spawned and forkserver workers start a fresh pool and run ``threads``."""
    return 1 if _forked else resolve_threads(threads)


@contextlib.contextmanager
def torch_threads(n_threads: Optional[int]) -> Iterator[int]:
    """Run the block with ``n_threads`` PyTorch threads (None: leave the setting alone) and
    restore ``torch.get_num_threads()`` after; yields the count in force."""
    before = torch.get_num_threads()
    if n_threads is None or n_threads == before:
        yield before
        return
    torch.set_num_threads(n_threads)
    try:
        yield n_threads
    finally:
        torch.set_num_threads(before)
