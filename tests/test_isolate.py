"""A call in a fresh process (the benches' and ``spacy_elmo bench``'s cells): its value or its
error come back, a process that dies says so, and an interruption here ends the process there."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from spacy_elmo.bench.isolate import ProcessDied, RemoteTraceback, run_isolated


def _fail_with(message: str) -> None:
    raise ValueError(message)


def _write_pid_and_sleep(path: str) -> None:
    Path(path).write_text(str(os.getpid()))
    time.sleep(300)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_isolated_runs_get_a_fresh_process_and_their_environment():
    assert run_isolated(os.getpid) != os.getpid()
    assert run_isolated(os.getenv, "SPACY_ELMO_BENCH_PROBE", env={"SPACY_ELMO_BENCH_PROBE": "1"}) == "1"
    assert "SPACY_ELMO_BENCH_PROBE" not in os.environ
    assert run_isolated(os.getpid, isolate=False) == os.getpid()


def test_an_error_in_the_fresh_process_is_raised_here_with_its_traceback():
    with pytest.raises(ValueError, match="weights.hdf5 is cut") as raised:
        run_isolated(_fail_with, "weights.hdf5 is cut")
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    assert "_fail_with" in str(raised.value.__cause__)  # where it was raised, over there


def test_a_process_that_dies_without_a_result_says_so():
    with pytest.raises(ProcessDied, match="exit code 3"):
        run_isolated(os._exit, 3)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_ctrl_c_here_ends_the_fresh_process(tmp_path):
    pid_file = tmp_path / "pid"

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 120
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=press_ctrl_c, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_isolated(_write_pid_and_sleep, str(pid_file))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not _alive(int(pid_file.read_text()))  # ended and reaped, not left sleeping
