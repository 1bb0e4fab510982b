"""The processes a test run starts, so that none outlives it: a pytest plugin (``conftest.py``
takes its fixture and hook) that fails the test leaving a process running, and the run, once
every test and xdist worker has ended, if anything it started still runs.

A process whose parent dies is adopted by the nearest "child subreaper" above it, or by PID 1:
without one, a test's leftover (a multiprocessing child of a killed command, say) would leave the
pytest process tree and no check could see it. ``become_subreaper`` makes this process that
ancestor, so leftovers come back to it as children (Linux; elsewhere nothing is checked).
"""

from __future__ import annotations

import ctypes
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Set

import pytest

#: prctl's option that makes the calling process adopt its orphaned descendants (linux/prctl.h).
PR_SET_CHILD_SUBREAPER = 36
CHECKED = sys.platform.startswith("linux")


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    group: int  # the process group
    state: str  # "Z": exited, not yet reaped (nothing runs)
    command: str


def become_subreaper() -> None:
    if CHECKED:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _processes() -> Dict[int, Process]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        state, parent, group = stat.rsplit(")", 1)[1].split()[:3]
        found[int(entry)] = Process(int(entry), int(parent), int(group), state, command.strip())
    return found


def running_in_group(group: int, grace_s: float = 0.0) -> Dict[int, Process]:
    """The processes of process group ``group`` still running after up to ``grace_s`` seconds."""
    end = time.monotonic() + grace_s
    while True:
        found = {p.pid: p for p in _processes().values() if p.group == group and p.state != "Z"}
        if not found or time.monotonic() >= end:
            return found
        time.sleep(0.1)


def running_descendants(pid: int = 0) -> Dict[int, Process]:
    """The processes below ``pid`` (default: this one) that still run (zombies left out), except
    this process's own multiprocessing helpers (its resource tracker and forkserver: they end with
    it, and a spawn or forkserver pool of a test starts them once)."""
    pid = pid or os.getpid()
    table = _processes()
    children: Dict[int, List[int]] = {}
    for process in table.values():
        children.setdefault(process.parent, []).append(process.pid)
    helpers = _own_multiprocessing_helpers() if pid == os.getpid() else set()
    found, todo = {}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            if table[child].state != "Z" and child not in helpers:
                found[child] = table[child]
    return found


def _own_multiprocessing_helpers() -> Set[int]:
    pids = {
        getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None),
        getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None),
    }
    return {pid for pid in pids if pid}


def left_behind(before: Set[int], grace_s: float) -> Dict[int, Process]:
    """The descendants not in ``before`` still running after up to ``grace_s`` seconds (a process
    that was just told to stop may need a moment)."""
    end = time.monotonic() + grace_s
    while True:
        left = {pid: p for pid, p in running_descendants().items() if pid not in before}
        if not left or time.monotonic() >= end:
            return left
        time.sleep(0.1)


def end_processes(processes: Dict[int, Process]) -> None:
    """SIGKILL each process (by its id), then reap those that became this process's children."""
    for pid in processes:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.2)
    for pid in processes:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not a child of this process: its own parent reaps it
            pass


def reap_adopted_zombies(before: Set[int]) -> None:
    """Reap the exited orphans this process adopted as subreaper since ``before`` was taken (no
    one else will): they would stay in the process table as zombies until the run ends."""
    me = os.getpid()
    for process in _processes().values():
        if process.parent == me and process.state == "Z" and process.pid not in before:
            try:
                os.waitpid(process.pid, os.WNOHANG)
            except ChildProcessError:
                pass


def describe(processes: Dict[int, Process]) -> str:
    return "\n".join(f"  pid {p.pid} (parent {p.parent}): {p.command[:200]}" for p in processes.values())


#: How long a test's processes may take to end after it (a child just told to stop).
PROCESS_GRACE_S = 10.0


@pytest.fixture(autouse=True)
def no_process_left_behind(request):
    """Fail the test that leaves a process running (ended here, so the run goes on clean)."""
    if not CHECKED:
        yield
        return
    before = set(running_descendants())
    yield
    left = left_behind(before, PROCESS_GRACE_S)
    reap_adopted_zombies(before)
    if left:
        end_processes(left)
        pytest.fail(f"{request.node.nodeid} left {len(left)} process(es) running (killed now):\n{describe(left)}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """Once every test and every xdist worker has ended, nothing the run started may still run.
    Orphans come back to this process (a subreaper), the workers' included: an xdist worker is
    left out, since its controller checks after the workers have exited."""
    if not CHECKED or hasattr(session.config, "workerinput"):
        return
    left = left_behind(set(), PROCESS_GRACE_S)
    if not left:
        return
    end_processes(left)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = f"the test run left {len(left)} process(es) running (killed now):\n{describe(left)}"
    if reporter is not None:
        reporter.write_line(message, red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config):  # when used as a plugin of its own (-p process_tree)
    become_subreaper()
