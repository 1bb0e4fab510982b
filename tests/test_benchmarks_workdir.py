"""A bench's temporary folder goes away when the bench is stopped: SIGTERM and Ctrl-C remove it
at once; after a SIGKILL, the next bench removes it (its name holds the dead process's id)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.subprocesses import subprocess_env
from benchmarks.workdir import SIGTERM_STATUS, bench_workdir
from conftest import AS_FROM_A_TERMINAL  # Ctrl-C's signal at its default, as from a terminal
from process_tree import describe, running_in_group

PREFIX = "spacy-elmo-bench-"
# Long enough to be stopped in the middle: a fresh process per path and round.
LONG_BENCH = [
    "inference", "--shape", "fixture", "--batch-size", "2", "--seq-len", "5",
    "--n-batches", "1", "--repeats", "50", "--device", "cpu",
]



def _start_bench(tmp_root: Path) -> subprocess.Popen:
    """The bench in a process group of its own, so that the test can end it with the processes
    it spawned (a SIGKILL of the bench alone leaves its pool worker behind)."""
    env = {**subprocess_env(threads=1), "TMPDIR": str(tmp_root)}
    return subprocess.Popen(
        [sys.executable, "-c", AS_FROM_A_TERMINAL, "-m", "benchmarks", *LONG_BENCH], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def _kill_group(bench: subprocess.Popen) -> None:
    """SIGKILL to the bench and every process of its group (its spawned workers)."""
    try:
        os.killpg(bench.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    bench.wait(timeout=60)


def _wait_for_workdir(bench: subprocess.Popen, tmp_root: Path, deadline_s: float = 120) -> Path:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = [p for p in tmp_root.glob(f"{PREFIX}{bench.pid}-*") if any(p.iterdir())]
        if found:
            return found[0]
        assert bench.poll() is None, bench.stderr.read()
        time.sleep(0.2)
    _kill_group(bench)
    pytest.fail("the bench made no work folder in time")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_stopped_bench_removes_its_temporary_folder(tmp_path, stop):
    bench = _start_bench(tmp_path)
    try:
        folder = _wait_for_workdir(bench, tmp_path)
        bench.send_signal(stop)
        status = bench.wait(timeout=60)
        left = running_in_group(bench.pid, grace_s=10)  # its measuring process ends with it
    finally:
        _kill_group(bench)  # whatever the bench left running, on a failure too
    assert not folder.exists()
    assert not left, describe(left)
    assert status == (SIGTERM_STATUS if stop == signal.SIGTERM else 130), bench.stderr.read()[-2000:]


def test_the_next_bench_removes_the_folder_of_a_killed_one(tmp_path, monkeypatch):
    bench = _start_bench(tmp_path)
    try:
        folder = _wait_for_workdir(bench, tmp_path)
    finally:
        _kill_group(bench)  # SIGKILL: nothing in the bench can clean up
    assert folder.exists()
    alive = tmp_path / f"{PREFIX}{os.getpid()}-other"  # a running process's folder stays
    alive.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with bench_workdir(None) as directory:
        assert directory.name.startswith(f"{PREFIX}{os.getpid()}-")
        assert not folder.exists() and alive.exists()
    assert not directory.exists()


def test_a_named_workdir_is_kept(tmp_path):
    with bench_workdir(tmp_path / "work") as directory:
        (directory / "model").write_text("cached")
    assert (tmp_path / "work" / "model").read_text() == "cached"


def test_sigterm_handler_is_restored_after_the_bench():
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with bench_workdir(None):
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
