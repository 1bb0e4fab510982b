"""The suite's own guard: a test that leaves a process running fails, naming it, and so does a run
whose session fixture leaves one; the leftovers are ended either way. Run here on a small test
file of its own, in a pytest subprocess with the plugin (``process_tree.py``), on 2 xdist workers
as the README runs the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from process_tree import running_descendants

TESTS = Path(__file__).resolve().parent

LEAKY_TESTS = '''
import subprocess
import pytest

@pytest.fixture(scope="session")
def server():
    return subprocess.Popen(["sleep", "{session_sleep}"])  # never ended

def test_an_orphan_of_a_command():
    # The shell exits at once; its background child is orphaned, as a killed command's pool is.
    subprocess.run(["sh", "-c", "sleep {orphan_sleep} &"], check=True)

def test_a_clean_one():
    subprocess.run(["true"], check=True)

def test_a_session_fixture(server):
    assert server.poll() is None
'''


def _running(command: str) -> bool:
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[:2] == command.encode().split():
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    return True
        except OSError:
            continue
    return False


def test_leftover_processes_fail_the_test_and_the_run(tmp_path):
    # Durations no other process uses, to find them in the process table.
    session_sleep, orphan_sleep = f"{600 + os.getpid() % 97}.25", f"{600 + os.getpid() % 89}.75"
    (tmp_path / "test_leaky.py").write_text(LEAKY_TESTS.format(session_sleep=session_sleep, orphan_sleep=orphan_sleep))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "process_tree", "-n", "2", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_leaky.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        out, _ = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()
    assert run.returncode == 1, out
    assert "test_leaky.py::test_an_orphan_of_a_command left 1 process(es) running" in out, out
    assert f"sleep {orphan_sleep}" in out
    assert "the test run left 1 process(es) running" in out and f"sleep {session_sleep}" in out, out
    assert "3 passed, 1 error" in out, out  # the leaky test passes, then errors in its teardown
    assert not _running(f"sleep {orphan_sleep}") and not _running(f"sleep {session_sleep}")


def test_this_process_sees_its_own_descendants():
    with subprocess.Popen(["sleep", "30"]) as child:
        try:
            assert child.pid in running_descendants()
        finally:
            child.kill()
