"""``embed`` sharded under torchrun (2 processes, gloo on the CPU; the output test, with ``--device
cuda``, a rank per GPU, NCCL) and resumable: the output equals one process's, a SIGKILLed job
finishes with ``--resume``, a changed job is refused, a bad input line is refused before any rank
starts. Real
text (WikiText-2), the tiny AllenNLP test model, small chunks.

torchrun runs as users run it: a subprocess from a folder outside the checkout, with PYTHONPATH
pointing at it. One-process references run in this process (typer's CliRunner), which is faster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import h5py
import numpy as np
import pytest
import torch
from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab
from typer.testing import CliRunner

from benchmarks.subprocesses import descendants
from conftest import AS_FROM_A_TERMINAL, FIXTURES, checkout_pythonpath, gpu_id
from spacy_elmo.cli import app
from spacy_elmo.embedding import chunks as chunks_module
from spacy_elmo.embedding.chunks import finished_chunks, parts_folder

REPO = Path(__file__).resolve().parents[1]
WIKITEXT = FIXTURES / "wikitext_tiny" / "valid_head400.txt"


def _lines(n: int) -> List[str]:
    """The first ``n`` lines of WikiText-2's validation text, its 400 lines over again past 400
    (the kill tests want a job long enough to stop in the middle, not new text)."""
    lines = WIKITEXT.read_text(encoding="utf-8").splitlines()
    return [lines[i % len(lines)] for i in range(n)]


def _model(fixture_files) -> List[str]:
    return ["--options-file", str(fixture_files[0]), "--weight-file", str(fixture_files[1])]


def _env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    return {**env, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}


def _torchrun_argv(*args: str, nproc: int = 2) -> List[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
        "-m", "spacy_elmo", "embed", *args,
    ]


def _torchrun(cwd: Path, *args: str, nproc: int = 2) -> subprocess.CompletedProcess:
    return subprocess.run(
        _torchrun_argv(*args, nproc=nproc), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240
    )


def _one_process(*args: str):
    return CliRunner().invoke(app, ["embed", *args])


def _read(path: Path) -> Tuple[Dict[str, np.ndarray], object]:
    with h5py.File(path, "r") as f:
        data = {name: f[name][()] for name in f if name != "sentence_to_index"}
        index = json.loads(f["sentence_to_index"][0]) if "sentence_to_index" in f else None
    return data, index


def _assert_same_output(path: Path, reference: Path) -> None:
    data, index = _read(path)
    expected, expected_index = _read(reference)
    assert sorted(data) == sorted(expected)
    assert index == expected_index
    for name, array in expected.items():
        assert data[name].shape == array.shape, name
        np.testing.assert_allclose(data[name], array, atol=1e-6, err_msg=name)


@pytest.mark.slow
def test_ranks_write_what_one_process_writes(tmp_path, fixture_files, spacy_device):
    """On ``--device``: 2 ranks on the CPU (gloo), a rank per GPU on CUDA (NCCL, ``--gpu-id 0``:
    each rank on its local rank's GPU), against one process on the same device."""
    (tmp_path / "in.txt").write_text("\n".join(_lines(400)) + "\n", encoding="utf-8")
    args = ["--chunk-size", "25", *_model(fixture_files), "--gpu-id", gpu_id(spacy_device)]
    ranks = torch.cuda.device_count() if spacy_device.type == "cuda" else 2
    one = _one_process(str(tmp_path / "in.txt"), str(tmp_path / "one.hdf5"), *args)
    assert one.exit_code == 0, one.output
    two = _torchrun(tmp_path, "in.txt", "two.hdf5", *args, nproc=ranks)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "wrote 400 sentences" in two.stdout and f"{ranks} process{'es' * (ranks > 1)} embedded" in two.stdout
    _assert_same_output(tmp_path / "two.hdf5", tmp_path / "one.hdf5")
    data, index = _read(tmp_path / "two.hdf5")
    assert sorted(data, key=int) == [str(i) for i in range(400)] and data["1"].shape[0] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "one.hdf5", "two.hdf5"]  # parts gone


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


#: ``python HOLD_AFTER_FIRST_CHUNK embed ...`` (a script torchrun can start): each rank finishes
#: its first chunk, then waits to be killed, so a test kills the job mid-run at a known point
#: instead of racing its clock against the job's.
HOLD_AFTER_FIRST_CHUNK = """
import sys, time
from spacy_elmo.embedding import chunks
finish = chunks.ChunkWriter.finish
def finish_then_hold(writer):
    finish(writer)
    time.sleep(3600)
chunks.ChunkWriter.finish = finish_then_hold
from spacy_elmo.cli import main
sys.argv[0] = "spacy_elmo"
main()
"""


@pytest.mark.slow
def test_sigkill_of_every_process_then_resume(tmp_path, fixture_files):
    """SIGKILL torchrun and both workers once each rank has a chunk on disk; --resume (one
    process, a different world size) finishes with nothing lost and nothing written twice."""
    (tmp_path / "in.txt").write_text("\n".join(_lines(400)) + "\n", encoding="utf-8")
    (tmp_path / "hold.py").write_text(HOLD_AFTER_FIRST_CHUNK, encoding="utf-8")
    args = ["--chunk-size", "50", "--layers", "top", *_model(fixture_files)]
    argv = _torchrun_argv("in.txt", "out.hdf5", *args)
    argv[argv.index("-m", 3) : argv.index("embed")] = [str(tmp_path / "hold.py")]
    job = subprocess.Popen(argv, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    parts = parts_folder(tmp_path / "out.hdf5")
    deadline = time.monotonic() + 240  # a hang, not a race: each rank stops after its first chunk
    while finished_chunks(parts) != {0, 1} and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert finished_chunks(parts) == {0, 1}, "each rank should hold after its first chunk"
    workers = descendants(job.pid)
    os.killpg(job.pid, signal.SIGKILL)
    for pid in workers:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    job.wait(timeout=30)
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(workers) >= 2 and not any(_alive(pid) for pid in workers)
    assert not (tmp_path / "out.hdf5").exists()
    assert finished_chunks(parts) == {0, 1}

    resumed = _one_process(str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), *args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "resuming: 2 of 8 chunks" in resumed.output
    reference = _one_process(str(tmp_path / "in.txt"), str(tmp_path / "reference.hdf5"), *args)
    assert reference.exit_code == 0, reference.output
    _assert_same_output(tmp_path / "out.hdf5", tmp_path / "reference.hdf5")
    assert not parts.exists()


def _rank_of(pid: int) -> int:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return next(int(v[5:]) for v in environ if v.startswith(b"RANK="))


@pytest.mark.slow
def test_sigkill_of_one_rank_then_resume_under_torchrun(tmp_path, fixture_files):
    """SIGKILL rank 1 alone, once each rank holds after its first chunk (HOLD_AFTER_FIRST_CHUNK):
    torchrun stops rank 0; --resume under torchrun finishes the job."""
    (tmp_path / "in.txt").write_text("\n".join(_lines(400)) + "\n", encoding="utf-8")
    (tmp_path / "hold.py").write_text(HOLD_AFTER_FIRST_CHUNK, encoding="utf-8")
    args = ["--chunk-size", "50", "--layers", "average", *_model(fixture_files)]
    argv = _torchrun_argv("in.txt", "out.hdf5", *args)
    argv[argv.index("-m", 3) : argv.index("embed")] = [str(tmp_path / "hold.py")]
    job = subprocess.Popen(
        argv, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    parts = parts_folder(tmp_path / "out.hdf5")
    deadline = time.monotonic() + 240  # a hang, not a race: each rank stops after its first chunk
    while finished_chunks(parts) != {0, 1} and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert finished_chunks(parts) == {0, 1}, "each rank should hold after its first chunk"
    workers = {_rank_of(pid): pid for pid in descendants(job.pid) if Path(f"/proc/{pid}/environ").exists()}
    os.kill(workers[1], signal.SIGKILL)
    _, stderr = job.communicate(timeout=120)
    assert job.returncode != 0 and "Signal 9 (SIGKILL) received" in stderr, stderr[-2000:]
    assert not _alive(workers[0]) and not (tmp_path / "out.hdf5").exists()
    assert finished_chunks(parts) == {0, 1}

    resumed = _torchrun(tmp_path, "in.txt", "out.hdf5", *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming: 2 of 8 chunks" in resumed.stderr
    reference = _one_process(str(tmp_path / "in.txt"), str(tmp_path / "reference.hdf5"), *args)
    assert reference.exit_code == 0, reference.output
    _assert_same_output(tmp_path / "out.hdf5", tmp_path / "reference.hdf5")


@pytest.fixture
def unfinished(tmp_path, fixture_files, monkeypatch):
    """An unfinished one-process job: chunks 0 and 1 of 8 on disk, then a failure."""
    (tmp_path / "in.txt").write_text("\n".join(_lines(200)) + "\n", encoding="utf-8")
    args = [str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--chunk-size", "25", *_model(fixture_files)]
    finish = chunks_module.ChunkWriter.finish

    def finish_two(writer):
        if writer.chunk >= 2:
            raise OSError("disk full (simulated)")
        finish(writer)

    monkeypatch.setattr(chunks_module.ChunkWriter, "finish", finish_two)
    result = _one_process(*args)
    monkeypatch.setattr(chunks_module.ChunkWriter, "finish", finish)
    assert result.exit_code == 1
    assert "chunk 2 (" in result.output and "disk full (simulated)" in result.output
    assert finished_chunks(parts_folder(tmp_path / "out.hdf5")) == {0, 1}
    assert not list(parts_folder(tmp_path / "out.hdf5").glob("*.tmp"))  # the failed chunk left nothing
    return tmp_path, args


def test_resume_refuses_a_changed_input_or_option(unfinished):
    tmp_path, args = unfinished
    lines = (tmp_path / "in.txt").read_text(encoding="utf-8").splitlines()
    original = "\n".join(lines) + "\n"
    lines[150] = lines[150].replace("the", "a", 1)
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    changed_input = _one_process(*args, "--resume")
    assert changed_input.exit_code == 1
    assert "the unfinished run in" in changed_input.output and "its 2 finished chunk(s)" in changed_input.output
    assert f"start over: rm -r {parts_folder(tmp_path / 'out.hdf5')}, then run the same command without --resume" in changed_input.output
    assert "input.sha256: was" in changed_input.output and "layers" not in changed_input.output
    (tmp_path / "in.txt").write_text(original, encoding="utf-8")
    changed_layers = _one_process(*args, "--layers", "top", "--resume")
    assert changed_layers.exit_code == 1
    assert "different job (layers: was 'all', now 'top'): its 2 finished" in changed_layers.output
    assert finished_chunks(parts_folder(tmp_path / "out.hdf5")) == {0, 1}  # refusals touch nothing

    finished = _one_process(*args, "--resume")
    assert finished.exit_code == 0, finished.output
    assert "resuming: 2 of 8 chunks" in finished.output
    reference = _one_process(str(tmp_path / "in.txt"), str(tmp_path / "reference.hdf5"), *args[2:])
    _assert_same_output(tmp_path / "out.hdf5", tmp_path / "reference.hdf5")
    again = _one_process(*args, "--resume")
    assert again.exit_code == 0 and "is complete" in again.output
    other = _one_process(*args, "--layers", "top", "--resume")
    assert other.exit_code == 1 and "complete output of a different job (layers: was 'all'" in other.output
    assert reference.exit_code == 0


def test_without_resume_an_existing_run_or_output_is_refused(unfinished):
    tmp_path, args = unfinished
    parts = parts_folder(tmp_path / "out.hdf5")
    result = _one_process(*args)
    assert result.exit_code == 1
    assert f"{parts} holds an unfinished embed run of this job: add --resume to finish it, or remove the folder to start over: rm -r {parts}" in result.output
    assert finished_chunks(parts) == {0, 1}
    (tmp_path / "other.hdf5").write_bytes(b"not mine")
    result = _one_process(args[0], str(tmp_path / "other.hdf5"), *args[2:])
    assert result.exit_code == 1
    assert "other.hdf5 exists: embed does not overwrite" in result.output
    assert (tmp_path / "other.hdf5").read_bytes() == b"not mine"
    assert not parts_folder(tmp_path / "other.hdf5").exists()


def _docbin(path: Path) -> None:
    """Docs of three lines with sentence boundaries, every fourth doc without any, one doc with
    a whitespace token and one empty doc."""
    vocab = Vocab()
    lines = [line.split() for line in _lines(400) if line.strip()]
    docs = []
    for d in range(0, len(lines) - 3, 3):
        words = [w for line in lines[d : d + 3] for w in line]
        starts = [int(i == 0) for line in lines[d : d + 3] for i in range(len(line))]
        docs.append(Doc(vocab, words=words, sent_starts=starts) if d % 4 else Doc(vocab, words=words))
    docs.append(Doc(vocab, words=["A", "\n\n", "gap", "."], spaces=[True, False, True, False]))
    docs.append(Doc(vocab, words=[]))
    DocBin(docs=docs).to_disk(path)


@pytest.mark.slow
def test_spacy_input_and_sentence_keys_sharded(tmp_path, fixture_files):
    _docbin(tmp_path / "docs.spacy")
    args = ["--chunk-size", "40", "--layers", "average", *_model(fixture_files)]
    one = _one_process(str(tmp_path / "docs.spacy"), str(tmp_path / "docs1.hdf5"), *args)
    assert one.exit_code == 0, one.output
    two = _torchrun(tmp_path, "docs.spacy", "docs2.hdf5", *args)
    assert two.returncode == 0, two.stderr[-3000:]
    _assert_same_output(tmp_path / "docs2.hdf5", tmp_path / "docs1.hdf5")
    data, index = _read(tmp_path / "docs2.hdf5")
    assert index["A \n\ngap ."] == str(len(data) - 2)
    assert not data[str(len(data) - 2)][1].any()  # the whitespace token's row is zero

    seen, unique = set(), []
    for line in _lines(400):
        if line.strip() and "/" not in line and line.strip() not in seen:
            seen.add(line.strip())
            unique.append(line)
    (tmp_path / "keys.txt").write_text("\n".join(unique) + "\n", encoding="utf-8")
    args = ["--chunk-size", "30", "--layers", "top", "--use-sentence-keys", *_model(fixture_files)]
    one = _one_process(str(tmp_path / "keys.txt"), str(tmp_path / "keys1.hdf5"), *args)
    assert one.exit_code == 0, one.output
    two = _torchrun(tmp_path, "keys.txt", "keys2.hdf5", *args)
    assert two.returncode == 0, two.stderr[-3000:]
    _assert_same_output(tmp_path / "keys2.hdf5", tmp_path / "keys1.hdf5")
    assert sorted(_read(tmp_path / "keys2.hdf5")[0]) == sorted(line.strip() for line in unique)


@pytest.mark.slow
def test_an_undecodable_line_under_torchrun_is_refused_once_before_any_chunk(tmp_path, fixture_files):
    """A Latin-1 byte in a line of what would be rank 1's chunk: rank 0 reads every line first and
    refuses the job, naming the line, once; no rank embeds, nothing is left on disk."""
    lines = [line.encode("utf-8") for line in _lines(400)]
    bad = 5 * 25 + 3  # 0-based: input line 129
    lines[bad] = lines[bad] + b" caf\xe9 ."
    (tmp_path / "in.txt").write_bytes(b"\n".join(lines) + b"\n")
    result = _torchrun(tmp_path, "in.txt", "out.hdf5", "--chunk-size", "25", *_model(fixture_files))
    assert result.returncode != 0
    said = [line for line in result.stderr.splitlines() if line.startswith("error: ")]  # torchrun's report aside
    assert len(said) == 1 and said[0].startswith(f"error: in.txt, line {bad + 1}: not UTF-8 (byte 0xe9 at column "), result.stderr[-3000:]
    assert not parts_folder(tmp_path / "out.hdf5").exists() and not (tmp_path / "out.hdf5").exists()


def test_lines_end_where_python_ends_them(tmp_path):
    """\\n, \\r\\n and \\r end a line (universal newlines, AllenNLP's ``for line in file``);
    other Unicode separators stay inside their line; a line that is not UTF-8 is named."""
    from spacy_elmo.embedding.items import TextLines
    from spacy_elmo.text_files import TextFileError

    (tmp_path / "in.txt").write_bytes("a b\r\nc\rd\n\n  e\u2028f \n\xff".encode("utf-8") + b"\xff")
    lines = TextLines(tmp_path / "in.txt", tokenize=False)
    items = []
    with pytest.raises(TextFileError, match=r"in.txt, line 6: not UTF-8 \(byte 0xff at column 2\)"):
        for item in lines.items():
            items.append(item)
    assert [item.source for item in items] == [1, 2, 3, 4, 5]
    assert [lines.key(item) for item in items] == ["a b", "c", "d", "", "e\u2028f"]
    assert lines.location(items[4]) == f"input line 5 ({tmp_path / 'in.txt'})"


def test_precision_is_any_mode_of_the_registry(tmp_path, fixture_files):
    from spacy_elmo.nn.precision import PRECISIONS

    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    result = _one_process(str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--precision", "fp8", *_model(fixture_files))
    assert result.exit_code == 2  # a usage error, refused before anything runs
    message = " ".join(result.output.replace("│", " ").split())  # typer's box wraps the line
    assert f"--precision must be one of {sorted(PRECISIONS)}, got 'fp8'" in message
    assert not parts_folder(tmp_path / "out.hdf5").exists()


@pytest.mark.slow
def test_the_int8_cpu_path_sharded(tmp_path):
    """--precision int8 (the bundled model: the fixture is too small for int8 products) gives
    the same vectors in 2 processes as in one, and not fp32's."""
    from spacy_elmo.nn.precision import PRECISIONS

    if "int8" not in PRECISIONS:
        pytest.skip("no int8 precision mode in this build")
    (tmp_path / "in.txt").write_text("\n".join(_lines(60)) + "\n", encoding="utf-8")
    args = ["--chunk-size", "10", "--layers", "top"]
    for name, extra in (("fp32.hdf5", []), ("one.hdf5", ["--precision", "int8"])):
        result = _one_process(str(tmp_path / "in.txt"), str(tmp_path / name), *args, *extra)
        assert result.exit_code == 0, result.output
    two = _torchrun(tmp_path, "in.txt", "two.hdf5", *args, "--precision", "int8")
    assert two.returncode == 0, two.stderr[-3000:]
    _assert_same_output(tmp_path / "two.hdf5", tmp_path / "one.hdf5")
    int8, fp32 = _read(tmp_path / "one.hdf5")[0], _read(tmp_path / "fp32.hdf5")[0]
    assert max(float(np.abs(int8[k] - fp32[k]).max(initial=0)) for k in int8) > 1e-3


# Stopped by a signal: Ctrl-C in a terminal (SIGINT, to the whole foreground process group) or
# SIGTERM (kill, a job scheduler). The command says which chunks are finished and the command
# that finishes the job, exits with the shell's status for that signal, and leaves no chunk half
# written; the printed command, run as printed, finishes it.
STOPS = {signal.SIGINT: ("Ctrl-C (SIGINT)", 130), signal.SIGTERM: ("SIGTERM", 143)}


def _stop_when_a_chunk_is_done(argv: List[str], cwd: Path, stop: int, to_group: bool) -> Tuple[int, str]:
    """Start ``argv`` (Ctrl-C's signal at its default, as from a terminal), send ``stop`` once a
    chunk is on disk, and return its status and stderr; a deadline ends its process group."""
    job = subprocess.Popen(
        [sys.executable, "-c", AS_FROM_A_TERMINAL, *argv[1:]], cwd=cwd, env=_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        parts = parts_folder(cwd / "out.hdf5")
        deadline = time.monotonic() + 180
        while not finished_chunks(parts) and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert job.poll() is None, "the job ended before it could be stopped"
        (os.killpg if to_group else os.kill)(job.pid, stop)
        _, stderr = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.communicate()
    return job.returncode, stderr


def _finish_as_printed(text: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the command on the last line of ``text`` (what a stopped job printed), with this
    interpreter as its ``python`` and its ``torchrun``."""
    import shlex

    command = shlex.split(text.strip().splitlines()[-1])
    if command[0] == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", *command[1:]]
    else:
        assert command[:3] == ["python", "-m", "spacy_elmo"], command
        argv = [sys.executable, *command[1:]]
    return subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("stop", list(STOPS), ids=["Ctrl-C", "SIGTERM"])
def test_a_stopped_embed_says_what_is_done_and_how_to_finish(tmp_path, fixture_files, stop):
    (tmp_path / "in.txt").write_text("\n".join(_lines(3000)) + "\n", encoding="utf-8")
    args = ["--chunk-size", "50", "--layers", "top", *_model(fixture_files)]
    argv = [sys.executable, "-m", "spacy_elmo", "embed", "in.txt", "out.hdf5", *args]
    status, stderr = _stop_when_a_chunk_is_done(argv, tmp_path, stop, to_group=stop == signal.SIGINT)
    name, expected_status = STOPS[stop]
    parts = parts_folder(tmp_path / "out.hdf5")
    done = finished_chunks(parts)
    assert status == expected_status, stderr[-3000:]
    assert f"embed: stopped by {name}: {len(done)} of 60 chunks (" in stderr, stderr[-3000:]
    assert stderr.rstrip().endswith(
        f"Finish the job with:\n    python -m spacy_elmo embed in.txt out.hdf5 {' '.join(args)} --resume"
    ), stderr[-3000:]
    assert 0 < len(done) < 60 and not list(parts.glob("*.tmp")) and not (tmp_path / "out.hdf5").exists()
    if stop == signal.SIGTERM:  # the printed command finishes the job
        finished = _finish_as_printed(stderr, tmp_path)
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert f"resuming: {len(done)} of 60 chunks" in finished.stderr
        data, index = _read(tmp_path / "out.hdf5")
        assert len(data) == 3000 and len(index) == len(set(_lines(3000)))


@pytest.mark.slow
@pytest.mark.parametrize("stop", list(STOPS), ids=["Ctrl-C to the group", "SIGTERM to torchrun"])
def test_a_stopped_torchrun_embed_says_it_on_rank_0(tmp_path, fixture_files, stop):
    """torchrun passes the stop to its workers; rank 0 says what is done and how to finish (the
    same number of processes on one machine), then torchrun ends with its own status (1) and its
    traceback, which no worker can leave out."""
    (tmp_path / "in.txt").write_text("\n".join(_lines(3000)) + "\n", encoding="utf-8")
    args = ["--chunk-size", "50", "--layers", "top", *_model(fixture_files)]
    status, stderr = _stop_when_a_chunk_is_done(
        _torchrun_argv("in.txt", "out.hdf5", *args), tmp_path, stop, to_group=stop == signal.SIGINT
    )
    name, _ = STOPS[stop]
    done = finished_chunks(parts_folder(tmp_path / "out.hdf5"))
    assert status != 0 and 0 < len(done) < 60, stderr[-3000:]
    assert stderr.count(f"embed: stopped by {name}: ") == 1, stderr[-3000:]  # rank 0 only
    resume = f"torchrun --standalone --nproc-per-node 2 -m spacy_elmo embed in.txt out.hdf5 {' '.join(args)} --resume"
    assert f"Finish the job with:\n    {resume}\n" in stderr, stderr[-3000:]
    if stop == signal.SIGTERM:
        finished = _finish_as_printed(resume, tmp_path)
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert len(_read(tmp_path / "out.hdf5")[0]) == 3000


def test_an_undecodable_line_says_how_to_fix_it_and_leaves_nothing_in_the_way(tmp_path, fixture_files):
    """A Latin-1 byte in the input: refused before the model loads, naming the line and the command
    that converts the file; nothing is left on disk; the printed command, pasted, converts the
    file in place and the same command then embeds it."""
    lines = [line.encode("utf-8") for line in _lines(40)]
    lines[2] += b" caf\xe9 ."
    (tmp_path / "in.txt").write_bytes(b"\n".join(lines) + b"\n")
    args = [str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--chunk-size", "25", *_model(fixture_files)]
    result = _one_process(*args)
    assert result.exit_code == 1
    error = next(line for line in result.output.splitlines() if "error:" in line)
    assert error.startswith(f"error: {tmp_path / 'in.txt'}, line 3: not UTF-8 (byte 0xe9 at column "), error
    iconv = error.partition("e.g. from Latin-1: ")[2]
    assert iconv.startswith("iconv -f latin1 -t utf-8 ") and " && mv " in iconv, error
    assert not parts_folder(tmp_path / "out.hdf5").exists() and not (tmp_path / "out.hdf5").exists()

    subprocess.run(iconv, shell=True, check=True)
    fixed = _one_process(*args)
    assert fixed.exit_code == 0, fixed.output
    assert "wrote 40 sentences" in fixed.output


def test_a_rerun_after_the_input_changed_says_exactly_what_to_do(tmp_path, fixture_files):
    """A parts folder with finished chunks of an earlier input: the rerun, with or without
    --resume, names what changed and prints the command that clears the way; pasted, the same
    command then runs."""
    (tmp_path / "in.txt").write_text("\n".join(_lines(60)) + "\n", encoding="utf-8")
    args = [str(tmp_path / "in.txt"), str(tmp_path / "out.hdf5"), "--chunk-size", "25", *_model(fixture_files)]
    parts = parts_folder(tmp_path / "out.hdf5")
    parts.mkdir()
    (parts / "job.json").write_text(json.dumps({"compared": {"input.sha256": "0" * 64}}), encoding="utf-8")
    (parts / "chunk-0000000.hdf5").write_bytes(b"")
    for extra in ([], ["--resume"]):
        result = _one_process(*args, *extra)
        assert result.exit_code == 1
        assert "input.sha256: was 000000000000..." in result.output
        assert f"start over: rm -r {parts}, then run the same command without --resume" in result.output
    subprocess.run(f"rm -r {parts}", shell=True, check=True)
    assert _one_process(*args).exit_code == 0
