"""``benchmarks inference``: the biLM's forward pass against a per-time-step reference loop.

Paths, all on the same random weights and the same batches of real sentences:

- ``reference``: :class:`~.reference.ReferenceBiLM`, AllenNLP's algorithm (the baseline);
- ``exact``: the package's ``BiLMRunner(bilm)(char_ids)`` in float32 (what the pipe runs);
- ``exact + token cache``: the same after ``runner.cache_token_embeddings(words)`` with the
  ``CACHE_WORDS`` most frequent words of the whole benchmark text, as the pipe's
  ``token_cache_words`` caches a vocabulary's head, not the batches at hand: words outside it
  still go through the character CNN (the hit rate is reported; the build time apart);
- ``bf16 autocast``: ``runner.precision = "bf16"`` (the package runs its products under
  ``torch.autocast``), where bf16 runs (``spacy_elmo.nn.precision.runs_on``);
- ``tf32`` (CUDA only): float32 in a process that allows TensorFloat-32 (PyTorch's two TF32
  switches set once, in the path's own process: a user's setting, which the package never
  writes);
- ``int8`` and ``int8 + token cache`` (CPU only): ``runner.precision = "int8"``, int8 weights per
  output channel in the LSTM and highway/projection products (``spacy_elmo.nn.int8``).

The grid: every path at each batch size and thread count (a cell); ratios compare paths within a
cell (``x reference``, ``x exact``). Each path also reports the latency of one 20-token sentence.
Threads: the package's paths run as the pipe does in a process at one PyTorch op thread
(``BiLMRunner.threads``: the two directions and shards of the batch side by side);
``thread_modes`` may add ``"intra-op"`` (one biLM thread, ``torch.set_num_threads(threads)`` in
the path's process), for a before and after in one run. The reference always runs on PyTorch's intra-op threads. ``contention`` adds,
for each cell, runs beside a busy process (:func:`busy_process`: one Python ``while True`` loop,
what a second tenant of a shared machine looks like), to measure what threads give on a machine
someone else is using.

On CUDA the reference and the float32 paths run with TF32 off (cuDNN convolutions default to it):
each path's process sets PyTorch's TF32 switches once, on for the ``tf32`` path only.

``against`` (another checkout of the package: ``git worktree add ../old COMMIT``) adds each
package path as that checkout runs it (``"exact @ against"``: its own package and
``measure_path``, in a process started there), beside this checkout's, and each of this
checkout's paths reports ``x against``: a before and after of one change in one run.

The paths run in ``repeats`` rounds, in the listed order and then reversed, alternately, so
that a drift in the machine's load does not always favour the same path. In each round every
path runs in a fresh process (see :mod:`.isolate`): load the weights, one priming call on a single
sentence (lazy initialisation, code pages), then, under :class:`~.measure.PeakMemory`, ``warmup``
batches and one timed pass over all batches. The best pass of the rounds counts; all are kept.
Throughput counts real tokens only (no boundary tokens, no padding). Every layer of every path is
compared with the reference: float32 paths must agree to ``EXACT_TOLERANCE``; for reduced
precision the per-token cosine (mean and smallest) and the largest absolute difference are
reported for each layer and for the default mix.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np
import torch
from tqdm import tqdm

from spacy_elmo.bench.isolate import run_isolated
from spacy_elmo.bench.measure import MB, PeakMemory, alternating
from spacy_elmo.bench.report import ratio
from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import DEFAULT_TEXT, text_lines
from spacy_elmo.chars import batch_to_ids
from spacy_elmo.nn.precision import runs_on
from spacy_elmo.nn.runner import BiLMRunner
from spacy_elmo.nn.scalar_mix import default_mix_weights
from spacy_elmo.sources import load_bilm, resolve_weight_source

from .reference import ReferenceBiLM, max_abs_differences
from .shapes import cached_model, shape_source
from .text import sentence_batches, words_by_frequency
from .text import sentences as text_sentences
from .timing import Stopwatch

EXACT_TOLERANCE = 1e-5
#: Words in the token cache of the ``exact + token cache`` path (a pipe's token_cache_words).
CACHE_WORDS = 10_000
REFERENCE = "reference (AllenNLP-style loop)"
EXACT = "exact"
TOKEN_CACHE = "exact + token cache"
BF16 = "bf16 autocast"
TF32 = "tf32"
INT8 = "int8"
INT8_CACHE = "int8 + token cache"
#: The reduced-precision paths: (path, the runner's precision mode, whether the token cache is on).
REDUCED = {BF16: ("bf16", False), TF32: ("fp32", False), INT8: ("int8", False), INT8_CACHE: ("int8", True)}
#: On CUDA, paths that repeat another without CUDA graphs (``BiLMRunner.cuda_graphs``): what they gain.
NO_GRAPHS = " without CUDA graphs"
#: Tokens of the one sentence whose latency each path reports (a short interactive request).
LATENCY_TOKENS = 20
LATENCY_RUNS = 5
#: How a path runs threads > 1: the pipe's way (``BiLMRunner.threads``) or PyTorch's (intra-op).
THREAD_MODES = ("split", "intra-op")
#: The suffix of a path as ``--against``'s checkout runs it.
AGAINST = " @ against"
#: What a process started in the ``--against`` checkout runs: its own ``measure_path`` on the
#: pickled arguments in file argv[1], its result pickled to file argv[2].
_AGAINST_CHILD = (
    "import pickle, sys\n"
    "from benchmarks.inference_bench import measure_path\n"
    "args = pickle.load(open(sys.argv[1], 'rb'))\n"
    "pickle.dump(measure_path(*args), open(sys.argv[2], 'wb'))\n"
)


def with_and_without_graphs(paths: Sequence[str]) -> List[str]:
    """Each path, then the same path without CUDA graphs."""
    return [variant for path in paths for variant in (path, path + NO_GRAPHS)]


def _base_path(path: str) -> str:
    """The path that ``path`` repeats without CUDA graphs or in ``--against``, or ``path`` itself."""
    return path.removesuffix(AGAINST).removesuffix(NO_GRAPHS)


def measure_in_checkout(checkout: Path, *args: Any) -> Dict[str, Any]:
    """``measure_path(*args)`` as the package and benchmarks of ``checkout`` run it, in a fresh
    process started there."""
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-inference-against-") as tmp:
        sent, received = Path(tmp) / "args.pickle", Path(tmp) / "result.pickle"
        sent.write_bytes(pickle.dumps(args))
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        done = subprocess.run([sys.executable, "-c", _AGAINST_CHILD, str(sent), str(received)], cwd=checkout,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"the run in {checkout} exited with {done.returncode}:\n{done.stderr[-3000:]}")
        return pickle.loads(received.read_bytes())


def resolve_devices(device: str) -> List[torch.device]:
    """``cpu``, ``cuda`` or ``all`` (the CPU, and CUDA when PyTorch sees a GPU)."""
    if device == "cpu":
        return [torch.device("cpu")]
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device")
        return [torch.device("cuda")]
    if device == "all":
        return [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    raise ValueError(f"--device must be cpu, cuda or all, got {device!r}")


def available_paths(device: torch.device, wanted: Optional[Sequence[str]] = None) -> List[str]:
    """The reference, the exact paths, and the reduced-precision paths that run on the device
    (``spacy_elmo.nn.precision.runs_on``); only those in ``wanted`` (and the reference) if given."""
    paths = [REFERENCE, EXACT, TOKEN_CACHE]
    paths += [
        path for path, (mode, _) in REDUCED.items() if runs_on(mode, device) and (path != TF32 or device.type == "cuda")
    ]
    if device.type == "cuda":
        paths = [REFERENCE] + with_and_without_graphs(paths[1:])
    if wanted is not None:
        unknown = sorted(set(wanted) - set(paths) - {REFERENCE})
        if unknown:
            raise ValueError(f"--paths: unknown or not available here: {unknown}; choose from {paths}")
        paths = [path for path in paths if path == REFERENCE or path in wanted]
    return paths


@contextlib.contextmanager
def busy_process(active: bool = True) -> Iterator[Optional[int]]:
    """A process that keeps one core busy (a Python ``while True`` loop) for the block, killed
    after it, on an error or Ctrl-C too; yields its pid (None when not ``active``)."""
    if not active:
        yield None
        return
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield busy.pid
    finally:
        busy.kill()
        busy.wait()


@contextlib.contextmanager
def _prepared(
    path: str, runner: BiLMRunner, device: torch.device, words: Sequence[str], info: Dict[str, Any]
) -> Iterator[Callable[[torch.Tensor], torch.Tensor]]:
    """A function char_ids -> layers for ``path``, with the path's set-up and tear-down."""
    if path == REFERENCE:
        yield ReferenceBiLM(runner.bilm)
        return

    def exact(char_ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return runner(char_ids)[0]

    base = _base_path(path)
    if base not in (EXACT, TOKEN_CACHE) and base not in REDUCED:
        raise ValueError(f"unknown inference path {path!r}")
    mode, cached = REDUCED.get(base, ("fp32", base == TOKEN_CACHE))
    runner.precision = mode
    runner.cuda_graphs = base == path
    try:
        if cached:  # built in the path's precision, as the pipe builds it
            with Stopwatch(device) as clock:
                runner.cache_token_embeddings(list(words), CACHE_WORDS)
            info["cache_build_s"] = clock.seconds
            info["cache_words"] = len(words)
        yield exact
    finally:
        runner.clear_token_cache()
        runner.precision = "fp32"
        runner.cuda_graphs = True


def measure_path(
    path: str,
    model_dir: str,
    batches: List[np.ndarray],
    words: List[str],
    device_name: str,
    warmup: int,
    repeats: int,
    threads: int,
    progress: bool,
    latency_ids: np.ndarray,
    thread_mode: str = "split",
) -> Dict[str, Any]:
    """Time one path and measure its peak memory (run in a fresh process by the benchmark), and
    the median time of one sentence (``latency_ids``), run alone. Returns the figures and
    the layers of every batch (float32 NumPy)."""
    split = thread_mode == "split" and path != REFERENCE
    # This path's own process: its thread count and TF32 switches, set once, as a user would.
    torch.set_num_threads(1 if split else threads)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = _base_path(path) == TF32
    device = torch.device(device_name)
    runner = BiLMRunner(load_bilm(model_dir, device=device), threads=threads if split else 1)
    inputs = [torch.from_numpy(ids).to(device) for ids in batches]
    info: Dict[str, Any] = {}
    pass_seconds: List[float] = []
    with _prepared(path, runner, device, words[:5], {}) as run:
        run(inputs[0][:1])  # priming, outside the measurement
    bar = tqdm(
        total=warmup + repeats * len(inputs),
        desc=f"{device.type} {path}",
        unit="batch",
        leave=False,
        disable=not progress,
    )
    with PeakMemory(device) as peak:
        with _prepared(path, runner, device, words, info) as run:
            for i in range(warmup):
                run(inputs[i % len(inputs)])
                bar.update(1)
            if runner.token_cache is not None:  # start the timed pass from the vocabulary alone,
                runner.cache_token_embeddings(list(words), CACHE_WORDS)  # not from its own words
            for _ in range(repeats):
                with Stopwatch(device) as clock:
                    outputs = []
                    for x in inputs:
                        outputs.append(run(x))
                        bar.update(1)
                pass_seconds.append(clock.seconds)
            info["latency_s"] = _latency(run, torch.from_numpy(latency_ids).to(device), device)
    bar.close()
    return {
        **info,
        "pass_s": min(pass_seconds),
        "pass_all_s": pass_seconds,
        "peak_mb": peak.mb,
        "peak_method": peak.method,
        "layers": [o.float().cpu().numpy() for o in outputs],
    }


def run_inference_bench(
    workdir: Path,
    shape: str = "original",
    seed: int = 0,
    text: Optional[Path] = None,
    batch_size: Union[int, Sequence[int]] = 32,
    seq_len: int = 25,
    n_batches: int = 4,
    warmup: int = 1,
    repeats: int = 2,
    device: str = "all",
    threads: Union[None, int, Sequence[int]] = None,
    isolate: bool = True,
    progress: bool = True,
    sentences: Optional[int] = None,
    weights: Optional[str] = None,
    paths: Optional[Sequence[str]] = None,
    thread_modes: Sequence[str] = ("split",),
    contention: bool = False,
    against: Optional[Path] = None,
) -> Dict[str, Any]:
    """Every path at every (batch size, thread count) cell, on random weights of ``shape`` or
    on the trained ``weights`` (a reference the package's resolver takes); ``sentences`` (if given) fixes the
    sentences of a timed pass whatever the batch size (whole batches, at least one), else each
    pass is ``n_batches`` batches. Each row names its cell; ratios compare paths of one cell;
    ``against``: each package path of that checkout too (the module docstring)."""
    if against is not None and not (Path(against) / "benchmarks" / "inference_bench.py").is_file():
        raise ValueError(f"--against {against}: not a checkout with benchmarks/inference_bench.py")
    batch_sizes = [batch_size] if isinstance(batch_size, int) else list(batch_size)
    thread_counts = [threads or torch.get_num_threads()] if threads is None or isinstance(threads, int) else list(threads)
    if weights is None:
        model_dir, options_source = cached_model(workdir, shape, seed, progress=progress), shape_source(shape)
    else:
        source = resolve_weight_source(weights, what="--weights")
        model_dir, options_source = source.directory, str(source.options_file)
    lines = text_lines(text)
    cache_words = words_by_frequency(lines)[:CACHE_WORDS]
    latency_ids = batch_to_ids([_latency_sentence(lines)])
    rows: List[Dict[str, Any]] = []
    cells: List[Dict[str, Any]] = []
    cached = set(cache_words)
    for size in batch_sizes:
        batches_per_pass = n_batches if sentences is None else max(1, -(-sentences // size))
        cell_batches = sentence_batches(lines, size, seq_len, batches_per_pass)
        stats = _batch_stats(cell_batches, cached)
        for busy in [False, True] if contention else [False]:
            for count in thread_counts:
                for mode in thread_modes if count > 1 else thread_modes[:1]:
                    cell = dict(batch_size=size, threads=count, thread_mode=mode, busy_process=busy)
                    cells.append({**cell, "n_batches": batches_per_pass, **stats})
                    with busy_process(busy):
                        rows += _measure_cell(
                            cell, model_dir, cell_batches, cache_words, latency_ids, device, warmup,
                            repeats, isolate, progress, paths, against,
                        )
    return {
        "benchmark": "inference",
        "system": system_info(),
        "settings": {
            "shape": shape if weights is None else None,
            "weights": weights,
            "shape_source": options_source,
            "seed": seed if weights is None else None,
            "text": str(text or DEFAULT_TEXT),
            "batch_sizes": batch_sizes,
            "thread_counts": thread_counts,
            "thread_modes": list(thread_modes),
            "contention": contention,
            "max_sequence_length": seq_len,
            "sentences_per_pass": sentences,
            "warmup_batches": warmup,
            "timed_passes": repeats,
            "latency_sentence_tokens": LATENCY_TOKENS,
            "isolated_processes": isolate,
            "exact_tolerance": EXACT_TOLERANCE,
            "against": None if against is None else str(Path(against).resolve()),
        },
        "cells": cells,
        "batches": cells[0],
        "model_mb": sum(f.stat().st_size for f in Path(model_dir).glob("*.safetensors")) / MB,
        "rows": rows,
    }


def _latency_sentence(lines: List[str]) -> List[str]:
    """The first sentence of the text with at least ``LATENCY_TOKENS`` tokens, cut to that."""
    for sentence in text_sentences(lines, LATENCY_TOKENS):
        if len(sentence) == LATENCY_TOKENS:
            return sentence
    raise ValueError(f"the text has no line of {LATENCY_TOKENS} tokens for the latency measurement")


def _batch_stats(batches: List[List[List[str]]], cached: set) -> Dict[str, Any]:
    tokens = [w for batch in batches for sentence in batch for w in sentence]
    padded = sum(len(batch) * max(len(s) for s in batch) for batch in batches)
    return {
        "sentences": sum(len(b) for b in batches),
        "real_tokens": len(tokens),
        "padded_positions": padded,
        "padding_fraction": 1 - len(tokens) / padded,
        "distinct_words": len(set(tokens)),
        "cache_hit_rate": sum(w in cached for w in tokens) / len(tokens),
    }


def _measure_cell(
    cell: Dict[str, Any],
    model_dir: Path,
    sentences: List[List[List[str]]],
    cache_words: List[str],
    latency_ids: np.ndarray,
    device: str,
    warmup: int,
    repeats: int,
    isolate: bool,
    progress: bool,
    wanted_paths: Optional[Sequence[str]] = None,
    against: Optional[Path] = None,
) -> List[Dict[str, Any]]:
    """One row per path and device for one (batch size, threads, thread mode, busy process) cell."""
    batches = [batch_to_ids(batch) for batch in sentences]
    masks = [torch.from_numpy((ids > 0).any(axis=-1)) for ids in batches]
    real_tokens = sum(len(sentence) for batch in sentences for sentence in batch)
    rows: List[Dict[str, Any]] = []
    for dev in resolve_devices(device):
        device_rows: Dict[str, Dict[str, Any]] = {}
        reference_row: Dict[str, Any] = {}
        reference_layers: List[torch.Tensor] = []
        paths = available_paths(dev, wanted_paths)
        if against is not None:
            paths += [path + AGAINST for path in paths if path != REFERENCE]

        def measure(path: str, _: int, on: str = str(dev)) -> Dict[str, Any]:  # a pass in a fresh process
            args = (path.removesuffix(AGAINST), str(model_dir), batches, cache_words, on, warmup, 1,
                    cell["threads"], progress, latency_ids, cell["thread_mode"])  # fmt: skip
            if path.endswith(AGAINST):
                return measure_in_checkout(Path(against).resolve(), *args)
            return run_isolated(measure_path, *args, isolate=isolate)

        runs = alternating(paths, repeats, measure)
        for path in paths:
            measured = _best_of(runs[path])
            layers = [torch.from_numpy(x) for x in measured.pop("layers")]
            row: Dict[str, Any] = {"device": dev.type, **cell, "path": path, **measured}
            row["tokens_per_s"] = real_tokens / row["pass_s"]
            row["latency_ms"] = 1000 * row["latency_s"]
            if path == REFERENCE:
                reference_row, reference_layers = row, layers
            else:
                row.update(_compare(layers, reference_layers, masks, precise=_base_path(path) not in REDUCED))
            row["speedup"] = ratio(row["tokens_per_s"], reference_row["tokens_per_s"])
            row["memory_ratio"] = ratio(row["peak_mb"], reference_row["peak_mb"])
            device_rows[path] = row
        for path, row in device_rows.items():
            if EXACT in device_rows:
                row["x_exact"] = ratio(row["tokens_per_s"], device_rows[EXACT]["tokens_per_s"])
            if path + AGAINST in device_rows:
                row["x_against"] = ratio(row["tokens_per_s"], device_rows[path + AGAINST]["tokens_per_s"])
        rows += device_rows.values()
    return rows


def _latency(run: Callable[[torch.Tensor], torch.Tensor], char_ids: torch.Tensor, device: torch.device) -> float:
    """The median of ``LATENCY_RUNS`` calls on one sentence, after one untimed call."""
    run(char_ids)
    seconds = []
    for _ in range(LATENCY_RUNS):
        with Stopwatch(device) as clock:
            run(char_ids)
        seconds.append(clock.seconds)
    return float(np.median(seconds))


def _best_of(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One path's rounds: the fastest pass counts, every pass is kept, and the highest peak."""
    best = dict(min(runs, key=lambda run: run["pass_s"]))
    best["pass_all_s"] = [run["pass_s"] for run in runs]
    best["peak_mb"] = max(run["peak_mb"] for run in runs)
    best["latency_s"] = min(run["latency_s"] for run in runs)
    return best


def _compare(
    layers: List[torch.Tensor], reference: List[torch.Tensor], masks: List[torch.Tensor], precise: bool
) -> Dict[str, Any]:
    """Float32 paths: each layer's largest difference from the reference, within
    ``EXACT_TOLERANCE``. Reduced precision: per layer and for the pipe's default mix
    (``mix_weights = null``: the LSTM layers equally; ``gamma = 1``), the mean and smallest cosine
    of the real tokens' vectors to the reference's and the largest absolute difference."""
    per_layer = np.max([max_abs_differences(a, b) for a, b in zip(layers, reference)], axis=0)
    result: Dict[str, Any] = {
        "max_abs_diff_per_layer": [float(x) for x in per_layer],
        "max_abs_diff": float(per_layer.max()),
    }
    if precise:
        result["exact"] = bool(per_layer.max() < EXACT_TOLERANCE)
        return result
    got = torch.cat([x[:, m] for x, m in zip(layers, masks)], dim=1).float()  # (layers, tokens, dim)
    want = torch.cat([x[:, m] for x, m in zip(reference, masks)], dim=1).float()
    cosines = [torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-12) for a, b in zip(got, want)]
    weights = torch.from_numpy(default_mix_weights(got.shape[0]))[:, None, None]
    got_mix, want_mix = (weights * got).sum(0), (weights * want).sum(0)
    mix = torch.nn.functional.cosine_similarity(got_mix, want_mix, dim=-1, eps=1e-12)
    result.update(
        cosine_mean_per_layer=[float(c.mean()) for c in cosines],
        cosine_min_per_layer=[float(c.min()) for c in cosines],
        mix_cosine_mean=float(mix.mean()),
        mix_cosine_min=float(mix.min()),
        mix_max_abs_diff=float((got_mix - want_mix).abs().max()),
        top_layer_cosine_mean=float(cosines[-1].mean()),
        top_layer_cosine_min=float(cosines[-1].min()),
    )
    result["worst_mean_cosine"] = min(result["cosine_mean_per_layer"] + [result["mix_cosine_mean"]])
    return result


INFERENCE_COLUMNS = [
    ("device", "device", ""),
    ("path", "path", ""),
    ("batch_size", "batch", ""),
    ("threads", "threads", ""),
    ("thread_mode", "mode", ""),
    ("busy_process", "busy core", ""),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("speedup", "x reference", ".2f"),
    ("x_exact", "x exact", ".2f"),
    ("x_against", "x against", ".3f"),
    ("peak_mb", "peak MB", ".1f"),
    ("memory_ratio", "mem x ref", ".2f"),
    ("max_abs_diff", "max |diff|", ".1e"),
    ("exact", "< 1e-5", ""),
    ("worst_mean_cosine", "min mean cos", ".5f"),
    ("latency_ms", "20-token ms", ".1f"),
]


def thread_scaling(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each package path's tokens/s with n threads over its tokens/s with one, in the same cell
    otherwise (batch size, busy process, device): the issue's table."""
    base = {
        (r["device"], r["path"], r["batch_size"], r["busy_process"]): r["tokens_per_s"]
        for r in rows
        if r["threads"] == 1
    }
    table = []
    for r in rows:
        one = base.get((r["device"], r["path"], r["batch_size"], r["busy_process"]))
        if r["threads"] > 1 and one:
            keys = ("device", "path", "batch_size", "threads", "thread_mode", "busy_process", "tokens_per_s")
            table.append(
                {**{key: r[key] for key in keys}, "one_thread_tokens_per_s": one, "x_one_thread": r["tokens_per_s"] / one}
            )
    return table


SCALING_COLUMNS = [
    ("path", "path", ""),
    ("batch_size", "batch", ""),
    ("threads", "threads", ""),
    ("thread_mode", "mode", ""),
    ("busy_process", "busy core", ""),
    ("one_thread_tokens_per_s", "1 thread tokens/s", ",.0f"),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("x_one_thread", "x 1 thread", ".2f"),
]
