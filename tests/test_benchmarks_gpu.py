"""``python -m benchmarks gpu``: the rehearsal on the CPU (``--device cpu --smoke``) of the runs
prepared for a GPU machine. Every stage writes one JSON with the machine and its
cases and one log; a failing case is recorded and the stage goes on; the deadline stops a stage,
not the JSON; an unknown stage is refused before anything runs."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
import torch
from typer.testing import CliRunner

from benchmarks import gpu_run
from benchmarks.cli import app
from benchmarks.gpu_run import SMOKE, STAGES, Stage

SYSTEM_FIELDS = ("python", "torch", "cpu", "gpu", "gpu_driver", "cuda", "cudnn", "cupy", "spacy")
MAX_FILE_BYTES = 16 * 2**20


def _bench_gpu(out: Path, *args: str):
    return CliRunner().invoke(app, ["gpu", "--out", str(out), "--device", "cpu", "--smoke", *args])


def _read(out: Path, stage: str) -> dict:
    return json.loads((out / f"{stage}.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """``--stage all --device cpu --smoke`` once: what CI runs before a GPU's minutes are spent."""
    out = tmp_path_factory.mktemp("gpu-rehearsal")
    return _bench_gpu(out, "--stage", "all"), out


def test_the_rehearsal_writes_one_json_and_one_log_per_stage(rehearsal):
    result, out = rehearsal
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(f"{stage}.{ext}" for stage in STAGES for ext in ("json", "log"))
    assert all((out / name).stat().st_size < MAX_FILE_BYTES for name in files)


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_records_the_machine_and_every_case_ok(rehearsal, stage):
    result, out = rehearsal
    data = _read(out, stage)
    assert data["stage"] == stage and data["device"] == "cpu" and data["smoke"] is True
    assert set(SYSTEM_FIELDS) <= set(data["system"]), data["system"]
    assert data["system"]["gpu"] is None or torch.cuda.is_available()
    failed = {case["case"]: case.get("error") for case in data["cases"] if not case["ok"]}
    assert not failed, failed
    assert data["ok"] and data["cases"]
    for case in data["cases"]:  # one line each on the console
        assert f"{stage} | {case['case']}: ok" in result.output
    assert (out / f"{stage}.log").read_text(encoding="utf-8").strip()


def test_the_stages_measure_what_they_promise(rehearsal):
    _, out = rehearsal
    (one_rank,) = _read(out, "one-rank")["cases"]
    assert one_rank["ratio_torchrun_to_one_process"] > 0


def _three_cases(first: Callable) -> Callable:
    """A stage's runner: ``first`` as its first case, then two that return at once."""

    def runner(stage):
        stage.case("first", first)
        stage.case("second", lambda stage: {"summary": "two"})
        stage.case("third", lambda stage: {"summary": "three"})

    return runner


def test_a_failing_case_is_recorded_and_the_stage_goes_on(tmp_path, monkeypatch):
    def planted(stage):
        raise RuntimeError("planted failure")

    monkeypatch.setitem(gpu_run.RUNNERS, "one-rank", _three_cases(planted))
    result = _bench_gpu(tmp_path, "--stage", "one-rank")
    assert result.exit_code == 0, result.output
    cases = _read(tmp_path, "one-rank")["cases"]
    assert [case["status"] for case in cases] == ["failed", "ok", "ok"]
    assert "RuntimeError: planted failure" in cases[0]["error"]
    assert "one-rank | first: failed" in result.output
    assert _read(tmp_path, "one-rank")["ok"] is False


def test_the_deadline_keeps_what_is_done_and_skips_the_rest(tmp_path, monkeypatch):
    def runs_past_the_deadline(stage):
        stage.deadline = time.monotonic() - 1.0  # the stage's deadline passes while it runs
        return {"summary": "done"}

    monkeypatch.setitem(gpu_run.RUNNERS, "one-rank", _three_cases(runs_past_the_deadline))
    result = _bench_gpu(tmp_path, "--stage", "one-rank", "--deadline-s", "600")
    assert result.exit_code == 0, result.output
    data = _read(tmp_path, "one-rank")
    assert [case["status"] for case in data["cases"]] == ["ok", "skipped: deadline", "skipped: deadline"]
    assert set(SYSTEM_FIELDS) <= set(data["system"])


def test_a_subprocess_is_stopped_at_the_deadline(tmp_path):
    stage = Stage("one-rank", torch.device("cpu"), SMOKE, 2.0, tmp_path, logging.getLogger(__name__), print)
    code, output, _ = stage.run(
        [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    )
    assert code is None and "started" in output  # None: stopped, not ended


def test_an_unknown_stage_is_refused(tmp_path):
    result = _bench_gpu(tmp_path / "out", "--stage", "benchmarks")
    assert result.exit_code == 1
    assert "--stage must be one of one-rank, all, got 'benchmarks'" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_cuda_without_a_gpu_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["gpu", "--stage", "one-rank", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "--device cuda: PyTorch" in result.output and "sees no CUDA device" in result.output
    assert list(tmp_path.iterdir()) == []


def test_help_speaks_to_users():
    """The command's help says what it does, not which machine it was written for."""
    result = CliRunner().invoke(app, ["gpu", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "Measure the package's GPU code paths" in text and "lent" not in text, text


def test_the_stage_json_is_written_after_every_case(tmp_path, monkeypatch):
    """A call cut by its time limit keeps the cases that ended: the stage's JSON is rewritten
    after each, marked complete only at the end."""
    seen = []

    def runner(stage):
        stage.case("first", lambda stage: {"summary": "one"})
        seen.append(json.loads((tmp_path / "one-rank.json").read_text(encoding="utf-8")))
        stage.case("second", lambda stage: {"summary": "two"})

    monkeypatch.setitem(gpu_run.RUNNERS, "one-rank", runner)
    gpu_run.run_stage("one-rank", tmp_path, device="cpu", smoke=True, deadline_s=60, echo=lambda line: None)
    assert [case["case"] for case in seen[0]["cases"]] == ["first"] and seen[0]["complete"] is False
    final = _read(tmp_path, "one-rank")
    assert final["complete"] is True and [case["case"] for case in final["cases"]] == ["first", "second"]
