"""What a user sees of ``embed`` under torchrun on a small input and when a run fails: real
torchrun runs (2 processes, gloo on the CPU, the tiny AllenNLP test model), started as users start
them (a subprocess outside the checkout, with deadlines).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import List

import h5py
import pytest

from benchmarks.subprocesses import package_argv, subprocess_env
from spacy_elmo.embedding.job import EmbedOptions, JobRefused, auto_chunk_size, prepare_job

DATA = Path(__file__).resolve().parents[1] / "spacy_elmo" / "data" / "wikitext2_valid_head.txt"
DEADLINE = 240


def _model(fixture_files) -> List[str]:
    return ["--options-file", str(fixture_files[0]), "--weight-file", str(fixture_files[1])]


def _torchrun(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        package_argv(["embed", *args], processes=2), cwd=cwd, env=subprocess_env(threads=1),
        capture_output=True, text=True, timeout=DEADLINE,
    )


def _sentences(n: int) -> str:
    lines = [line for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    return "\n".join(lines[:n]) + "\n"


@pytest.mark.slow
def test_twenty_sentences_under_torchrun_give_both_ranks_work(tmp_path, fixture_files):
    """Without --chunk-size a small input is cut so that every rank gets chunks (before: one
    chunk of 1000, all of it rank 0's, without a word)."""
    (tmp_path / "in.txt").write_text(_sentences(20), encoding="utf-8")
    result = _torchrun(tmp_path, "in.txt", "out.hdf5", *_model(fixture_files))
    assert result.returncode == 0, result.stderr[-3000:]
    shares = [line for line in result.stdout.splitlines() if line.startswith("sentences embedded per rank")]
    assert shares == ["sentences embedded per rank (7 chunks of 3): rank 0 11, rank 1 9"], result.stdout
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        assert len([name for name in f if name != "sentence_to_index"]) == 20


@pytest.mark.slow
def test_a_chunk_size_that_leaves_a_rank_idle_is_said(tmp_path, fixture_files):
    (tmp_path / "in.txt").write_text(_sentences(20), encoding="utf-8")
    result = _torchrun(tmp_path, "in.txt", "out.hdf5", "--chunk-size", "1000", *_model(fixture_files))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "20 sentences make 1 chunk of 1000: only 1 of the 2 processes get work" in result.stderr


@pytest.mark.slow
def test_a_failing_torchrun_job_ends_with_its_error_line(tmp_path, fixture_files):
    """The package's line comes first (rank 0 prints it) and again at the end of the root cause's
    ``traceback :`` in torchrun's report (torch's ``record`` writes it), above the report's
    closing rule, the last line torchrun prints."""
    result = _torchrun(tmp_path, "missing.txt", "out.hdf5", *_model(fixture_files))
    assert result.returncode == 1
    line = f"error: input file not found: {Path('missing.txt')}"
    lines = [text for text in result.stderr.rstrip("\n").splitlines() if text.strip()]
    assert lines[0] == line, result.stderr
    assert set(lines[-1]) == {"="}, result.stderr
    assert lines[-2] == f"  spacy_elmo.cli.errors.CommandFailed: {line}", result.stderr
    root_cause = lines.index("Root Cause (first observed failure):")
    assert any(text.startswith("  traceback : ") for text in lines[root_cause:]), result.stderr


def test_auto_chunk_size():
    assert [auto_chunk_size(n, 2) for n in (1, 20, 8000, 10**6)] == [1, 3, 1000, 1000]
    assert auto_chunk_size(20, 1) == 5


def test_resume_keeps_the_chunk_size_the_run_chose(tmp_path, fixture_files):
    """The chosen chunk size is recorded like a given one: a resumption without --chunk-size, on
    another number of processes, takes the run's own; a different one given is refused."""
    (tmp_path / "in.txt").write_text(_sentences(20), encoding="utf-8")
    options = EmbedOptions(
        tmp_path / "in.txt", tmp_path / "out.hdf5", options_file=fixture_files[0], weight_file=fixture_files[1]
    )
    first = prepare_job(options, world_size=2)
    first.release()
    assert (first.chunk_size, first.n_chunks) == (3, 7)
    resumed = prepare_job(EmbedOptions(**{**vars(options), "resume": True}), world_size=1)
    resumed.release()
    assert (resumed.chunk_size, resumed.n_chunks) == (3, 7)
    (tmp_path / "out.hdf5.parts" / "chunk-0000000.hdf5").write_bytes(b"")  # a finished chunk's name
    with pytest.raises(JobRefused, match="chunk_size: was 3, now 5"):
        prepare_job(EmbedOptions(**{**vars(options), "resume": True, "chunk_size": 5}))
    (tmp_path / "out.hdf5.parts" / "chunk-0000000.hdf5").unlink()
    # Nothing finished, nothing to lose: the folder gives way to the new job, which says so.
    fresh = prepare_job(EmbedOptions(**{**vars(options), "resume": True, "chunk_size": 5}))
    fresh.release()
    assert (fresh.chunk_size, fresh.n_chunks) == (5, 4) and any("removed" in note for note in fresh.notes)
