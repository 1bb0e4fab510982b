"""``python -m spacy_elmo bench``: the user's bench of the elmo pipe, per precision and thread
count. The runs check that every cell ran in a process of its own with the settings it names, on
the tokens a tokenizer counts independently; they never assert a speed."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import spacy
import torch
from typer.testing import CliRunner

from conftest import FIXTURES, checkout_pythonpath
from spacy_elmo.bench.text import DEFAULT_TEXT, DEFAULT_TEXT_NOTICE, text_lines
from spacy_elmo.cli import app

runner = CliRunner()
ELMO_FIXTURE_FILES = [str(FIXTURES / "allennlp_elmo" / "options.json"), str(FIXTURES / "allennlp_elmo" / "lm_weights.hdf5")]


def _bench(tmp_path: Path, *args: str) -> dict:
    """The command as users run it, in a process of its own (its cells start their own with
    spawn); the JSON it wrote, with its stdout."""
    output = tmp_path / "bench.json"
    env = {**os.environ, "PYTHONPATH": checkout_pythonpath(), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", "bench", *args, "--output", str(output)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(output.read_text())
    result["_stdout"] = run.stdout
    return result


def _timed_tokens(text: Path, batch_size: int, warmup: int, batches: int) -> int:
    """spaCy's English tokens in the timed docs: the text's lines, cycled, after the warm-up."""
    lines = text_lines(text)
    docs = [lines[i % len(lines)] for i in range((warmup + batches) * batch_size)][warmup * batch_size :]
    tokenizer = spacy.blank("en").tokenizer
    return sum(len(tokenizer(doc)) for doc in docs)


@pytest.mark.slow
def test_each_cell_runs_in_a_fresh_process_with_its_settings(tmp_path):
    """Two precisions, two rounds: two cells, four processes; each cell's best round counts and
    its ratio is to the first cell's tokens/s."""
    result = _bench(
        tmp_path, "--precision", "fp32,int8", "--threads", "auto", "--batch-size", "4",
        "--warmup", "1", "--batches", "2", "--rounds", "2",
    )
    cells = result["cells"]
    assert [(c["precision"], c["threads"]) for c in cells] == [("fp32", "auto"), ("int8", "auto")]
    assert all(c["model_block"] == {"precision": c["precision"], "threads": c["threads"]} for c in cells)
    pids: List[int] = [pid for c in cells for pid in c["process_ids"]]
    assert len(pids) == len(set(pids)) == 4
    expected_tokens = _timed_tokens(DEFAULT_TEXT, 4, 1, 2)
    for cell in cells:
        assert cell["tokens"] == expected_tokens and cell["docs"] == 8 and len(cell["batch_seconds"]) == 2
        assert len(cell["rounds_tokens_per_s"]) == 2 and cell["tokens_per_s"] == max(cell["rounds_tokens_per_s"])
        assert cell["tokens_per_s"] == pytest.approx(cell["tokens"] / cell["seconds"])
        assert cell["x_first"] == pytest.approx(cell["tokens_per_s"] / cells[0]["tokens_per_s"])
        assert cell["loaded_mb"] > 50 and cell["peak_mb"] >= 0  # torch and the model are loaded
    assert result["settings"]["text"] == str(DEFAULT_TEXT) and result["settings"]["device"] == "cpu"
    assert {"cpu", "torch", "torch_threads"} <= set(result["system"])
    # The second round runs the cells in reverse: int8 first.
    rounds = [line.rsplit(":", 1)[0] for line in result["_stdout"].splitlines() if line.startswith("round ")]
    assert rounds == [
        "round 1/2: fp32, threads auto", "round 1/2: int8, threads auto",
        "round 2/2: int8, threads auto", "round 2/2: fp32, threads auto",
    ]
    assert "x first" in result["_stdout"]


@pytest.mark.slow
def test_a_saved_pipeline_runs_with_each_cells_settings(tmp_path):
    """A pipeline directory (its elmo pipe named otherwise, a sentencizer before it) is loaded
    with each cell's precision and threads in that pipe's model block, and reads --text."""
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    options, weights = ELMO_FIXTURE_FILES
    model = {"options_file": options, "weight_file": weights, "threads": 1}
    nlp.add_pipe("elmo", name="contextual", config={"model": model}).initialize()
    nlp.to_disk(tmp_path / "pipeline")
    text = tmp_path / "text.txt"
    text.write_text("The bank raised its rates .\n\nA river bank flooded .\nIt rained .\n", encoding="utf-8")
    result = _bench(
        tmp_path, str(tmp_path / "pipeline"), "--precision", "bf16", "--threads", "2,1", "--text", str(text),
        "--batch-size", "2", "--warmup", "0", "--batches", "3", "--rounds", "1",
    )
    cells = result["cells"]
    assert [c["model_block"] for c in cells] == [{"precision": "bf16", "threads": 2}, {"precision": "bf16", "threads": 1}]
    assert all(c["tokens"] == _timed_tokens(text, 2, 0, 3) for c in cells)
    assert result["settings"]["pipeline"] == str(tmp_path / "pipeline") and result["settings"]["model"] is None


@pytest.mark.parametrize(
    "args, says",
    [
        (["--precision", "fp32,fp8"], "must be one of"),
        (["--threads", "1,0"], "greater than or equal to 1"),
        (["--threads", "two"], "greater than or equal to 1"),
        (["--precision", "tf32"], "TF32 is a process-wide PyTorch setting"),
        (["--text", "/no/such/text.txt"], "benchmark text not found: /no/such/text.txt"),
        (["--weights", "/no/such/model"], "does not exist"),
        (["--options-file", ELMO_FIXTURE_FILES[0]], "go together"),
        ([str(FIXTURES), "--weights", "small"], "PIPELINE brings its own weights"),
        ([str(FIXTURES)], "not a saved pipeline (no config.cfg)"),
    ],
    ids=["precision", "threads-0", "threads-word", "tf32", "text", "weights", "half-pair", "pipeline-and-weights", "not-a-pipeline"],
)
def test_bad_input_is_refused_before_any_cell_runs(args, says):
    result = runner.invoke(app, ["bench", *args], env={"COLUMNS": "300"})
    assert result.exit_code != 0
    assert says in " ".join(result.output.replace("│", " ").split()), result.output


def test_a_pipeline_without_an_elmo_pipe_is_refused(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "no-elmo")
    result = runner.invoke(app, ["bench", str(tmp_path / "no-elmo")])
    assert result.exit_code == 1 and "no elmo pipe among its components (sentencizer)" in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_gpu_id_without_cuda_is_refused():
    result = runner.invoke(app, ["bench", "--gpu-id", "0"])
    assert result.exit_code == 1 and "sees no CUDA device" in result.output


def test_the_default_text_is_package_data():
    """The bench reads the same text without --text, in a checkout or installed: a slice of
    WikiText-2 valid in the package, with its attribution and licence beside it."""
    package = Path(__import__("spacy_elmo").__file__).parent
    assert DEFAULT_TEXT.parent == package / "data"
    data = DEFAULT_TEXT.read_bytes()
    assert 60_000 <= len(data) <= 80_000 and data.endswith(b"\n")  # whole lines
    assert len(text_lines()) > 100
    notice = DEFAULT_TEXT_NOTICE.read_text(encoding="utf-8")
    assert "CC BY-SA 3.0" in notice and "Merity" in notice
    import spacy_elmo.bench.text as text_module

    assert "CC BY-SA 3.0" in text_module.__doc__
    # The same lines as the test fixture cut independently from WikiText-2's valid.txt.
    assert (FIXTURES / "wikitext_tiny" / "valid_head400.txt").read_bytes().startswith(data)


def test_no_shipped_bench_module_reads_the_source_tree():
    """What the package keeps of the benchmarks ships in the wheel (``spacy_elmo/bench``, the
    sense data): none of it may look for a checkout's project/, tests/ or the data beside it (an
    installed package would quietly measure something else). The project's kit
    (``benchmarks/``) runs from a checkout and may."""
    package = Path(__import__("spacy_elmo").__file__).parent
    for path in [*(package / "bench").glob("*.py"), package / "cli" / "bench.py", package / "cli" / "senses.py"]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        strings = {
            node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        assert "REPO_ROOT" not in names, path
        assert not strings & {"project", "tests", "fixtures", "shared", "configs"}, path
