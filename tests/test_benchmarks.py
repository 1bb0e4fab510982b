"""The measurement kit (``python -m benchmarks``, a checkout's ``benchmarks/``) on tiny shapes.

These tests check what could silently be wrong in a benchmark: that its baselines compute the
same thing as the package (so a speed ratio compares equals), and that every result is complete
and well formed. They never assert a timing or a speed-up: those are measured, not tested.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from benchmarks.cli import app
from benchmarks.inference_bench import (
    BF16,
    EXACT,
    INT8,
    INT8_CACHE,
    REFERENCE,
    TF32,
    TOKEN_CACHE,
    available_paths,
    run_inference_bench,
)
from benchmarks.pipe_bench import run_doc_bench
from benchmarks.pretrain_bench import CASES, PretrainCase, run_pretrain_bench
from benchmarks.reference import ReferenceBiLM
from benchmarks.shapes import BUNDLED_RECIPE_NAME, shape_options
from benchmarks.text import sentence_batches
from conftest import ELMO_FIXTURE, make_options, write_random_bilm_tf
from spacy_elmo import DEFAULT_MODEL, batch_to_ids, load_bilm
from spacy_elmo.bench.text import DEFAULT_TEXT, text_lines
from spacy_elmo.cli.weights import weight_source
from spacy_elmo.nn.precision import PRECISIONS, runs_on
from spacy_elmo.options import BiLMOptions
from spacy_elmo.pretrain.config import model_overrides

ROOT = Path(__file__).resolve().parents[1]
PROJECT_RECIPE = ROOT / "project" / "configs" / "pretrain_wikitext2.cfg"

runner = CliRunner()

SENTENCES = [
    ["The", "bank", "raised", "its", "rates", "."],
    ["Hi"],
    ["Sie", "saß", "am", "Ufer", "der", "Spree", "🙂", "x" * 70, ""],
    ["One", "more", "line"],
]
FIXTURE_FILES = (ELMO_FIXTURE / "options.json", ELMO_FIXTURE / "lm_weights.hdf5")
FIXTURE_MODEL = {"weights": None, "options_file": str(FIXTURE_FILES[0]), "weight_file": str(FIXTURE_FILES[1])}


def _package_layers(bilm, sentences):
    with torch.no_grad():
        return bilm(torch.from_numpy(batch_to_ids(sentences)))[0]


@pytest.mark.parametrize(
    "options",
    [
        make_options(),
        make_options(activation="tanh", n_highway=2, clip=0),
        make_options(n_layers=3, use_skip_connections=False),
        make_options(n_layers=1, n_highway=0),
    ],
    ids=["relu-clipped", "tanh-unclipped", "3-layers-no-skip", "1-layer-no-highway"],
)
def test_reference_loop_matches_the_package(tmp_path, options):
    """The baseline of ``benchmarks inference`` is an independent re-implementation: it must give the
    package's layers (random weights written straight in the bilm-tf layout by conftest)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # options without skip connections warn on load
        bilm = load_bilm(*write_random_bilm_tf(tmp_path, options, scale=0.5))
    want = _package_layers(bilm, SENTENCES)
    got = ReferenceBiLM(bilm)(torch.from_numpy(batch_to_ids(SENTENCES)))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=0)


def test_reference_loop_matches_tensorflow(fixture_bilm, fixture_sentences):
    """The reference against bilm-tf's own outputs (lm_embeddings_k.hdf5, written by TensorFlow;
    the first batch of the stateful run starts from zero states, like a stateless one)."""
    batch = [fixture_sentences[k][0].split() for k in range(3)]
    layers = ReferenceBiLM(fixture_bilm)(torch.from_numpy(batch_to_ids(batch))).numpy()
    for k, sentence in enumerate(batch):
        with h5py.File(ELMO_FIXTURE / f"lm_embeddings_{k}.hdf5", "r") as f:
            want = np.concatenate(list(f["0"][()]), axis=-1)
        np.testing.assert_allclose(layers[-1, k, : len(sentence)], want, atol=1e-6, rtol=1e-5)


def test_inference_bench_result(tmp_path):
    result = run_inference_bench(
        tmp_path, shape="fixture", batch_size=3, seq_len=6, n_batches=2, warmup=1, repeats=1,
        device="cpu", threads=1, isolate=False, progress=False,
    )
    rows = {row["path"]: row for row in result["rows"]}
    assert list(rows)[:2] == [REFERENCE, EXACT]
    batches = result["batches"]
    assert 0 < batches["real_tokens"] < batches["padded_positions"] <= 2 * 3 * 6
    for path, row in rows.items():
        assert row["tokens_per_s"] > 0 and row["peak_mb"] >= 0, path
        if path != REFERENCE:
            assert len(row["max_abs_diff_per_layer"]) == 3
        if "exact" in row:
            assert row["exact"], (path, row["max_abs_diff_per_layer"])
        if "top_layer_cosine_mean" in row:
            assert 0.99 < row["top_layer_cosine_mean"] <= 1.0 + 1e-6
    assert rows[REFERENCE]["speedup"] == 1.0


def test_the_token_cache_path_caches_the_texts_frequent_words_not_the_timed_ones(tmp_path, monkeypatch):
    """A pipe caches a vocabulary's head; caching exactly the timed words would make every lookup
    a hit and flatter the path. Words outside the cache still go through the character CNN."""
    monkeypatch.setattr("benchmarks.inference_bench.CACHE_WORDS", 20)
    result = run_inference_bench(
        tmp_path, shape="fixture", batch_size=3, seq_len=8, n_batches=2, warmup=0, repeats=1,
        device="cpu", threads=1, isolate=False, progress=False,
    )
    cached = {row["path"]: row for row in result["rows"] if "cache_words" in row}
    assert set(cached) == {TOKEN_CACHE, INT8_CACHE} and all(row["cache_words"] == 20 for row in cached.values())
    assert cached[TOKEN_CACHE]["exact"]  # float32: within 1e-5 of the reference
    assert cached[INT8_CACHE]["worst_mean_cosine"] > 0.99  # reduced precision: cosines instead
    assert 0 < result["batches"]["cache_hit_rate"] < 1


def test_inference_grid_has_a_row_per_cell_and_path_with_ratios_within_the_cell(tmp_path):
    """--batch-size 2,4 --threads 1,2: every path in every (batch size, threads) cell; x exact
    compares paths of one cell; each cell times the same sentences (--sentences); the latency of
    one 20-token sentence is measured per path."""
    result = run_inference_bench(
        tmp_path, shape="fixture", batch_size=[2, 4], seq_len=6, warmup=0, repeats=1, device="cpu",
        threads=[1, 2], isolate=False, progress=False, sentences=4,
    )
    cells = [(c["batch_size"], c["threads"]) for c in result["cells"]]
    assert cells == [(2, 1), (2, 2), (4, 1), (4, 2)]
    assert {c["sentences"] for c in result["cells"]} == {4}
    assert [c["n_batches"] for c in result["cells"]] == [2, 2, 1, 1]
    paths = available_paths(torch.device("cpu"))
    assert [(r["batch_size"], r["threads"], r["path"]) for r in result["rows"]] == [
        (b, t, p) for b, t in cells for p in paths
    ]
    for b, t in cells:
        rows = {r["path"]: r for r in result["rows"] if (r["batch_size"], r["threads"]) == (b, t)}
        assert rows[EXACT]["x_exact"] == 1.0
        for row in rows.values():
            assert row["x_exact"] == pytest.approx(row["tokens_per_s"] / rows[EXACT]["tokens_per_s"], rel=1e-6)
            assert row["latency_ms"] > 0
        for path in (INT8, BF16):
            layers = rows[path]["cosine_mean_per_layer"]
            assert len(layers) == 3 and min(layers) > 0.99
            assert rows[path]["worst_mean_cosine"] == min(layers + [rows[path]["mix_cosine_mean"]])
            assert rows[path]["mix_cosine_min"] <= rows[path]["mix_cosine_mean"] <= 1 + 1e-6
    assert result["settings"]["batch_sizes"] == [2, 4] and result["settings"]["thread_counts"] == [1, 2]


def test_inference_contention_and_thread_modes_give_the_issues_table(tmp_path, monkeypatch):
    """--threads 1,2 --intra-op --contention --paths exact: each thread count and mode with and
    without a busy process beside it, and each package path's ratio to its own one-thread speed;
    the busy process is gone afterwards."""
    import benchmarks.inference_bench as inference
    from benchmarks.inference_bench import busy_process, thread_scaling

    pids = []
    real_busy = inference.busy_process

    def recording_busy(active):
        manager = real_busy(active)
        pid = manager.__enter__()
        pids.append(pid)
        return _Entered(manager, pid)

    monkeypatch.setattr(inference, "busy_process", recording_busy)
    result = run_inference_bench(
        tmp_path, shape="fixture", batch_size=2, seq_len=5, n_batches=1, warmup=0, repeats=1,
        device="cpu", threads=[1, 2], isolate=False, progress=False, paths=[EXACT],
        thread_modes=("split", "intra-op"), contention=True,
    )
    cells = [(c["threads"], c["thread_mode"], c["busy_process"]) for c in result["cells"]]
    assert cells == [(1, "split", False), (2, "split", False), (2, "intra-op", False),
                     (1, "split", True), (2, "split", True), (2, "intra-op", True)]
    assert {r["path"] for r in result["rows"]} == {REFERENCE, EXACT} and all(r["exact"] for r in result["rows"] if r["path"] == EXACT)
    scaling = thread_scaling(result["rows"])
    assert [(r["path"], r["thread_mode"], r["busy_process"]) for r in scaling if r["path"] == EXACT] == [
        (EXACT, "split", False), (EXACT, "intra-op", False), (EXACT, "split", True), (EXACT, "intra-op", True)]
    assert all(r["x_one_thread"] > 0 for r in scaling)
    busy = [pid for pid in pids if pid is not None]
    assert len(busy) == 3
    for pid in busy:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(RuntimeError):
        with busy_process() as pid:
            raise RuntimeError("an error beside the busy process")
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ValueError, match="--paths: unknown"):
        available_paths(torch.device("cpu"), ["fast"])


class _Entered:
    """A context manager already entered (the test records the busy pid as it starts)."""

    def __init__(self, manager, value):
        self.manager, self.value = manager, value

    def __enter__(self):
        return self.value

    def __exit__(self, *exc):
        return self.manager.__exit__(*exc)


def test_inference_bench_on_trained_weights(tmp_path):
    """--weights: the bundled model's own weights instead of random ones of a shape."""
    result = run_inference_bench(
        tmp_path, batch_size=2, seq_len=5, n_batches=1, warmup=0, repeats=1, device="cpu",
        threads=1, isolate=False, progress=False, weights=DEFAULT_MODEL.name,
    )
    assert result["settings"]["weights"] == "en_wikitext_small" and result["settings"]["shape"] is None
    assert result["settings"]["shape_source"] == str(DEFAULT_MODEL / "options.json")
    rows = {row["path"]: row for row in result["rows"]}
    assert rows[EXACT]["exact"] and rows[INT8]["worst_mean_cosine"] > 0.999


def test_inference_cli_refuses_a_bad_list(tmp_path):
    from benchmarks.cli import app

    for option, value in (("--batch-size", "8,0"), ("--threads", "two"), ("--batch-size", "")):
        run = CliRunner().invoke(app, ["inference", option, value, "--device", "cpu"])
        assert run.exit_code == 2 and f"'{option}'" in run.output and "greater than or equal to 1" in run.output


def test_inference_rounds_alternate_the_order_of_the_paths(tmp_path, monkeypatch):
    import benchmarks.inference_bench as inference

    calls = []

    def recording(function, path, *args, **kwargs):
        calls.append(path)
        return inference.run_isolated.__wrapped__(function, path, *args, **kwargs)

    recording.__wrapped__ = inference.run_isolated
    monkeypatch.setattr(inference, "run_isolated", recording)
    result = run_inference_bench(
        tmp_path, shape="fixture", batch_size=2, seq_len=5, n_batches=1, warmup=0, repeats=2,
        device="cpu", threads=1, isolate=False, progress=False,
    )
    paths = [row["path"] for row in result["rows"]]
    assert calls == paths + paths[::-1]  # no path always first or last
    for row in result["rows"]:
        assert len(row["pass_all_s"]) == 2 and row["pass_s"] == min(row["pass_all_s"])


def test_inference_against_another_checkout_runs_its_paths_there_beside_these(tmp_path):
    """``--against``: each package path also as the other checkout runs it (here this checkout
    against itself, in processes started there), every layer checked against the reference, and
    this checkout's rows give the ratio to theirs (no timing is asserted: only that it was computed
    from both); a folder that is no checkout is refused."""
    from benchmarks.subprocesses import CHECKOUT

    result = run_inference_bench(
        tmp_path, shape="fixture", batch_size=2, seq_len=5, n_batches=1, warmup=0, repeats=1,
        device="cpu", threads=1, isolate=False, progress=False, paths=[EXACT], against=CHECKOUT,
    )  # fmt: skip
    rows = {row["path"]: row for row in result["rows"]}
    assert list(rows) == [REFERENCE, EXACT, EXACT + " @ against"]
    assert rows[EXACT + " @ against"]["exact"] and rows[EXACT]["exact"]
    assert rows[EXACT]["x_against"] == pytest.approx(rows[EXACT]["tokens_per_s"] / rows[EXACT + " @ against"]["tokens_per_s"])
    with pytest.raises(ValueError, match="not a checkout"):
        run_inference_bench(tmp_path, shape="fixture", device="cpu", against=tmp_path)


def test_runs_on_says_where_each_precision_runs():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert runs_on("fp32", cpu) and runs_on("fp32", cuda)
    assert runs_on("int8", cpu) and not runs_on("int8", cuda)
    assert runs_on("bf16", cpu) and runs_on("fp16", cpu)  # torch.autocast on the CPU takes both
    assert runs_on("fp16", cuda)
    assert set(PRECISIONS) >= {"fp32", "bf16", "fp16", "int8"}
    with pytest.raises(ValueError, match="precision"):
        runs_on("fp8", cpu)
    assert available_paths(cpu)[-3:] == [BF16, INT8, INT8_CACHE] and TF32 not in available_paths(cpu)


def test_sentence_batches_have_varied_lengths():
    batches = sentence_batches(text_lines(), batch_size=8, max_length=25, n_batches=3)
    lengths = [len(s) for batch in batches for s in batch]
    assert len(batches) == 3 and all(len(b) == 8 for b in batches)
    assert max(lengths) <= 25 and min(lengths) < max(lengths)


def test_pipe_doc_bench_result():
    """``benchmarks pipe --doc-tokens``: a row per precision and doc length, outputs of the size
    the model gives them, the model block's defaults."""
    result = run_doc_bench(
        FIXTURE_MODEL, sizes=(300, 600), precisions=("fp32", "int8"), threads=(1,), allocators=("default",), isolate=False,
    )  # fmt: skip
    assert [(row["precision"], row["tokens"]) for row in result["rows"]] == [
        ("fp32", 300), ("fp32", 600), ("int8", 300), ("int8", 600)
    ]
    assert all(row["loaded_rss_mb"] > 50 for row in result["rows"])  # torch + spaCy + the model
    assert result["settings"]["model"]["weight_file"] == str(FIXTURE_FILES[1])
    for row in result["rows"]:
        assert (row["max_sequence_length"], row["max_batch_tokens"], row["threads"]) == (256, 4096, 1)
        assert row["windows"] == math.ceil(row["tokens"] / 256)
        # doc._.elmo (n, 32) + doc._.elmo_layers (3, n, 32), float32
        assert row["outputs_mb"] == pytest.approx(row["tokens"] * 32 * 4 * 4 / 2**20)
        assert row["peak_mb"] >= 0 and row["layer_cache_mb"] == 0


def test_pretrain_bench_result():
    """A tiny window case: steady-state figures."""
    options = make_options(dim=16, projection_dim=8)
    case = PretrainCase(
        "tiny",
        vocab_size=300,
        overrides={
            **model_overrides(BiLMOptions.from_dict(options)),
            "objective.softmax": "sampled",
            "objective.n_negative_samples": 20,
        },
    )
    written = []
    result = run_pretrain_bench(
        [case], rows=[4], window=6, warmup=2, steps=3, seconds=0.0, device="cpu", threads=1,
        isolate=False, progress=False, on_row=lambda partial: written.append(len(partial["rows"])),
    )
    (row,) = result["rows"]
    assert written == [1]
    assert row["vocab_size"] == 300 and row["softmax"] == "sampled" and row["batching"] == "windows"
    assert row["softmax_updates"] == "dense"  # the default optimizer is adam
    assert row["tokens_per_s"] > 0 and row["step_s"] > 0 and row["timed_steps"] == 3
    assert row["batch_tokens"] == 24 and row["warmup_steps"] == 2
    assert row["softmax_parameters"] == 300 * 8 + 300


def test_pretrain_bench_measures_tf32_as_fp32_with_its_switches_off_the_gpu():
    """"tf32" is a training precision (fp32 in a process with TF32 on), not a pipe precision:
    the bench measures it where fp32 runs (on the CPU, as fp32) instead of refusing it."""
    options = make_options(dim=16, projection_dim=8)
    case = PretrainCase("tiny", vocab_size=300, overrides=model_overrides(BiLMOptions.from_dict(options)))
    result = run_pretrain_bench(
        [case], rows=[4], window=6, warmup=1, steps=1, seconds=0.0, precisions=["tf32"], device="cpu",
        threads=1, isolate=False, progress=False,
    )
    (row,) = result["rows"]
    assert "skipped" not in row and "error" not in row, row
    assert row["precision"] == "tf32" and row["tokens_per_s"] > 0


def test_pretrain_bench_refuses_max_rows_for_sentence_batches():
    with pytest.raises(ValueError, match='rows "max" sizes windows of running text'):
        run_pretrain_bench([CASES["bundled"]()], rows=["max"], device="cpu", isolate=False, progress=False)


def test_pretrain_bench_bundled_full_case_runs_the_full_softmax():
    """``--case bundled --case bundled-full``: the same config, sampled vs full softmax, on the
    recipe's own sentence batches."""
    cases = [CASES["bundled"](), CASES["bundled-full"]()]
    result = run_pretrain_bench(
        cases, warmup=0, steps=1, seconds=0.0, device="cpu", threads=1,
        isolate=False, progress=False,
    )
    sampled, full = result["rows"]
    assert (sampled["case"], sampled["softmax"]) == ("bundled", "sampled")
    assert (full["case"], full["softmax"]) == ("bundled-full", "full")
    assert sampled["vocab_size"] == full["vocab_size"] == 40000
    assert sampled["n_negative_samples"] == 4096 and sampled["batching"] == "sentences"
    recipe = DEFAULT_MODEL / BUNDLED_RECIPE_NAME
    assert result["settings"]["cases"]["bundled"]["config"] == str(recipe)


@pytest.mark.skipif(not PROJECT_RECIPE.is_file(), reason="no spaCy project in this checkout")
def test_the_packaged_recipe_is_the_projects():
    """The bundled model's recipe ships with it (benchmarks pretrain --case bundled reads it from the
    package): it must stay the project's pretraining config, comments aside."""
    from confection import Config

    packaged = Config().from_disk(DEFAULT_MODEL / BUNDLED_RECIPE_NAME, interpolate=False)
    project = Config().from_disk(PROJECT_RECIPE, interpolate=False)
    assert packaged == project


def test_the_bundled_shape_is_the_bundled_models_options_and_its_recipes_model():
    from confection import Config

    options = BiLMOptions.from_file(DEFAULT_MODEL / "options.json")
    assert shape_options("bundled") == options
    recipe = Config().from_disk(DEFAULT_MODEL / BUNDLED_RECIPE_NAME, interpolate=False)
    assert {f"model.{k}": v for k, v in recipe["model"].items()} == model_overrides(options)


def test_cli_writes_every_figure_to_json(tmp_path):
    output = tmp_path / "inference.json"
    args = [
        "inference", "--shape", "fixture", "--batch-size", "2", "--seq-len", "5",
        "--n-batches", "1", "--repeats", "1", "--device", "cpu", "--no-isolate",
        "--workdir", str(tmp_path / "work"), "--output", str(output),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "x reference" in result.output and "all agree" in result.output
    data = json.loads(output.read_text())
    assert {"benchmark", "system", "settings", "batches", "rows", "model_mb"} <= set(data)
    assert {"torch", "torch_threads", "cpu", "cpu_count", "cuda_available"} <= set(data["system"])
    assert {"tokens_per_s", "peak_mb", "speedup", "pass_s", "device", "path"} <= set(data["rows"][1])


def test_cli_pipe_runs_the_package_bench_on_a_random_shape_or_named_weights(tmp_path):
    """``benchmarks pipe`` is ``python -m spacy_elmo bench`` (its table and JSON) on random
    weights of a shape; --doc-tokens measures docs without sentences on the weights named."""
    output = tmp_path / "pipe.json"
    args = ["pipe", "--random-shape", "fixture", "--precision", "fp32", "--threads", "1", "--batch-size", "4",
            "--batches", "1", "--rounds", "1", "--workdir", str(tmp_path / "work"), "--output", str(output)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "measuring: random weights of the fixture shape" in result.output
    (cell,) = json.loads(output.read_text())["cells"]
    assert cell["tokens_per_s"] > 0 and (cell["precision"], cell["threads"]) == ("fp32", 1)

    files = ["--options-file", str(FIXTURE_FILES[0]), "--weight-file", str(FIXTURE_FILES[1])]
    args = ["pipe", *files, "--doc-tokens", "300", "--precision", "fp32", "--threads", "1", "--allocator", "default",
            "--output", str(output)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"measuring: {weight_source(None, *FIXTURE_FILES).describe()}" in result.output
    (row,) = json.loads(output.read_text())["rows"]
    assert row["tokens"] == 300 and row["allocator"] == "default"

    for args, message in (
        (["pipe", "--random-shape", "fixture", "--weights", "small"], "--random-shape"),
        (["pipe", "--random-shape", "tiny"], "'tiny' is not one of"),
        (["pipe", "--options-file", str(FIXTURE_FILES[0])], "go together"),
        (["senses", "--weight-file", str(FIXTURE_FILES[1])], "go together"),
        (["senses", "--weights", str(tmp_path / "missing")], "does not exist"),
        (["pipe", "--doc-tokens", "0"], "greater than or equal to 1"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)


def test_embed_soak_growth_leaves_out_the_warm_up():
    """Growth = last-quarter mean minus first-quarter mean of the samples after the first tenth."""
    from benchmarks.embed_bench import soak_growth

    warm_up = [(float(t), 100.0 * t) for t in range(5)]  # steep, as the model loads
    flat = [(5.0 + t, 1000.0 + (t % 2)) for t in range(80)]
    growth = soak_growth(warm_up + flat)  # 85 samples: the first 8 left out
    assert abs(growth["growth_mb"]) < 0.1 and growth["steady_samples"] == 77
    leaking = [(float(t), 1000.0 + t) for t in range(100)]  # 1 MB per sample
    steady = leaking[10:]
    quarter = len(steady) // 4
    expected = np.mean([mb for _, mb in steady[-quarter:]]) - np.mean([mb for _, mb in steady[:quarter]])
    assert soak_growth(leaking)["growth_mb"] == pytest.approx(expected) and expected > 60
    assert soak_growth(leaking[:4])["growth_mb"] is None  # too few samples: no verdict


def test_embed_bench_soak_samples_the_real_command(tmp_path):
    """benchmarks embed --soak runs `python -m spacy_elmo embed` on the bundled model and samples its
    resident memory; the input is the text's sentences up to the token count."""
    from benchmarks.cli import app

    output = tmp_path / "soak.json"
    run = CliRunner().invoke(
        app,
        ["embed", "--soak", "--tokens", "3000", "--interval", "0.2", "--workdir", str(tmp_path / "w"), "--output", str(output)],
    )
    assert run.exit_code == 0, run.output
    result = json.loads(output.read_text())
    soak = result["soak"]
    assert soak["tokens"] == result["settings"]["tokens"] >= 3000
    assert len(soak["rss_samples"]) >= 2 and max(mb for _, mb in soak["rss_samples"]) > 50  # torch + model
    lines = (tmp_path / "w" / "input.txt").read_text().splitlines()
    assert sum(len(line.split()) for line in lines) == soak["tokens"]
    assert "growth" in result and "soak:" in run.output


def test_embed_bench_refuses_half_a_pair_of_files(tmp_path):
    from benchmarks.cli import app

    run = CliRunner().invoke(app, ["embed", "--options-file", str(tmp_path / "o.json")])
    assert run.exit_code != 0 and "options_file and weight_file go together" in run.output  # the resolver's words, as the other benches


@pytest.mark.slow
def test_embed_bench_compares_one_process_with_torchrun_on_the_bundled_model(tmp_path):
    """One process x 2 threads and torchrun 2 x 1 on the bundled model and the package's text,
    each run as users run `python -m spacy_elmo embed`."""
    output = tmp_path / "embed.json"
    run = runner.invoke(app, ["embed", "--tokens", "1500", "--rounds", "1", "--output", str(output)])
    assert run.exit_code == 0, run.output
    result = json.loads(output.read_text())
    assert result["settings"]["model"] == "the bundled model"
    assert result["settings"]["text"] == str(DEFAULT_TEXT)
    rows = {row["setup"]: row for row in result["rows"]}
    assert set(rows) == {"1 process x 2 threads", "2 processes x 1 thread"}
    assert all(row["tokens"] >= 1500 for row in rows.values())
    assert len(rows["2 processes x 1 thread"]["peak_rss_mb_by_rank"]) == 2


def test_pretrain_ab_runs_both_checkouts_alternately_on_the_same_batches(tmp_path, monkeypatch):
    """``benchmarks pretrain-ab``, this checkout against itself at a tiny shape: each side's runs
    in fresh processes, each with its steps' figures, and the two ratios (no timing is asserted:
    only that they were computed from both sides). The text is given relative to the current
    folder, as on the command line (each run starts in its own checkout)."""
    from benchmarks.pretrain_ab import run_pretrain_ab
    from benchmarks.pretrain_bench import TINY
    from benchmarks.subprocesses import CHECKOUT

    monkeypatch.chdir(DEFAULT_TEXT.parent)
    result = run_pretrain_ab(
        CHECKOUT, Path(DEFAULT_TEXT.name), overrides={**TINY, "objective.softmax": "full"},
        threads=1, steps=2, warmup=1, rounds=2, timeout_s=300,
    )  # fmt: skip
    assert [len(result["runs"][side]) for side in ("this", "against")] == [2, 2]
    for runs in result["runs"].values():
        assert all(len(run["step_tokens_per_s"]) == 2 and run["tokens_per_s"] > 0 and run["threads"] == 1 for run in runs)
    medians = result["median_tokens_per_s"]
    assert result["ratio_of_medians"] == pytest.approx(medians["this"] / medians["against"])
    assert result["step_by_step_ratio_median"] > 0
    assert result["commits"]["this"] == result["commits"]["against"]  # one checkout (or no git in both)


def test_pretrain_ab_refuses_a_folder_that_is_no_checkout_or_a_missing_text(tmp_path):
    from benchmarks.pretrain_ab import run_pretrain_ab
    from benchmarks.subprocesses import CHECKOUT

    with pytest.raises(ValueError, match="not a checkout of spacy_elmo"):
        run_pretrain_ab(tmp_path, DEFAULT_TEXT, rounds=1)
    with pytest.raises(ValueError, match="--text .*missing.txt: no such file"):
        run_pretrain_ab(CHECKOUT, tmp_path / "missing.txt", rounds=1)


def test_adapt_ab_refuses_what_it_cannot_compare(tmp_path):
    """adapt-ab's checks before any run: the other side must be a checkout with adapt, the text
    must exist (the whole A/B runs adapt twice: a bench, not a test)."""
    from benchmarks.adapt_ab import run_adapt_ab

    with pytest.raises(ValueError, match="not a checkout of spacy_elmo with adapt"):
        run_adapt_ab(tmp_path, [tmp_path / "text.txt"])
    with pytest.raises(ValueError, match="text.txt: no such file"):
        run_adapt_ab(Path(__file__).resolve().parents[1], [tmp_path / "text.txt"])
