"""``bench inference``: the biLM's forward pass against a per-time-step reference loop.

Paths, all on the same random weights and the same batches of real sentences:

- ``reference``: :class:`~.reference.ReferenceBiLM`, AllenNLP's algorithm (the baseline);
- ``exact``: the package's ``bilm(char_ids)`` in float32;
- ``exact + token cache``: the same after ``bilm.cache_token_embeddings(words)`` with the
  ``CACHE_WORDS`` most frequent words of the whole benchmark text, as the pipe's
  ``token_cache_words`` caches a vocabulary's head, not the batches at hand: words outside it
  still go through the character CNN (the hit rate is reported; the build time apart);
- ``bf16 autocast``: ``bilm(char_ids)`` with ``bilm.precision = "bf16"`` (the package runs its
  products under ``torch.autocast``), where bf16 runs (``spacy_elmo.nn.precision.runs_on``);
- ``tf32`` (CUDA only): ``bilm.precision = "tf32"``, float32 with TensorFloat-32 products.

On CUDA the reference and the float32 paths run with TF32 off (cuDNN convolutions default to it).

The paths run in ``repeats`` rounds, in the listed order and then reversed, alternately, so
that a drift in the machine's load does not always favour the same path. In each round every
path runs in a fresh process (see :mod:`.isolate`): load the weights, one priming call on a single
sentence (lazy initialisation, code pages), then, under :class:`~.measure.PeakMemory`, ``warmup``
batches and one timed pass over all batches. The best pass of the rounds counts; all are kept.
Throughput counts real tokens only (no boundary tokens, no padding). Every layer of every path is
compared with the reference: float32 paths must agree to ``EXACT_TOLERANCE``; for bf16 the
largest difference and the cosine similarity of the top layer's token vectors are reported.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch
from tqdm import tqdm

from ..chars import batch_to_ids
from ..nn.bilm import BiLM
from ..nn.precision import precision_context, runs_on
from ..sources import load_bilm
from .isolate import run_isolated
from .measure import MB, PeakMemory, Stopwatch
from .reference import ReferenceBiLM, max_abs_differences, top_layer_cosine
from .report import ratio
from .shapes import cached_model, shape_source
from .system import resolve_devices, system_info
from .text import default_text_path, sentence_batches, text_lines, words_by_frequency

EXACT_TOLERANCE = 1e-5
#: Words in the token cache of the ``exact + token cache`` path (a pipe's token_cache_words).
CACHE_WORDS = 10_000
REFERENCE = "reference (AllenNLP-style loop)"
EXACT = "exact"
TOKEN_CACHE = "exact + token cache"
BF16 = "bf16 autocast"
TF32 = "tf32"


def available_paths(device: torch.device) -> List[str]:
    """The reference, the exact paths, and the reduced-precision paths that run on the device
    (``spacy_elmo.nn.precision.runs_on``)."""
    paths = [REFERENCE, EXACT, TOKEN_CACHE]
    paths += [path for path, mode in ((BF16, "bf16"), (TF32, "tf32")) if runs_on(mode, device)]
    return paths


@contextlib.contextmanager
def _prepared(
    path: str, bilm: BiLM, device: torch.device, words: Sequence[str], info: Dict[str, Any]
) -> Iterator[Callable[[torch.Tensor], torch.Tensor]]:
    """A function char_ids -> layers for ``path``, with the path's set-up and tear-down."""
    if path == REFERENCE:
        reference = ReferenceBiLM(bilm)

        def run_reference(char_ids: torch.Tensor) -> torch.Tensor:
            with precision_context("fp32", device):
                return reference(char_ids)

        yield run_reference
        return

    def exact(char_ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return bilm(char_ids)[0]

    if path == EXACT:
        yield exact
    elif path == TOKEN_CACHE:
        with Stopwatch(device) as clock:
            bilm.cache_token_embeddings(list(words))
        info["cache_build_s"] = clock.seconds
        info["cache_words"] = len(words)
        try:
            yield exact
        finally:
            bilm.clear_token_cache()
    elif path in (BF16, TF32):
        bilm.precision = "bf16" if path == BF16 else "tf32"
        try:
            yield exact
        finally:
            bilm.precision = "fp32"
    else:
        raise ValueError(f"unknown inference path {path!r}")


def measure_path(
    path: str,
    model_dir: str,
    batches: List[np.ndarray],
    words: List[str],
    device_name: str,
    warmup: int,
    repeats: int,
    threads: int,
    progress: bool = True,
) -> Dict[str, Any]:
    """Time one path and measure its peak memory (run in a fresh process by the benchmark).
    Returns the figures and the layers of every batch (float32 NumPy)."""
    torch.set_num_threads(threads)
    device = torch.device(device_name)
    bilm = load_bilm(model_dir, device=device)
    inputs = [torch.from_numpy(ids).to(device) for ids in batches]
    info: Dict[str, Any] = {}
    pass_seconds: List[float] = []
    with _prepared(path, bilm, device, words[:5], {}) as run:
        run(inputs[0][:1])  # priming, outside the measurement
    bar = tqdm(
        total=warmup + repeats * len(inputs),
        desc=f"{device.type} {path}",
        unit="batch",
        leave=False,
        disable=not progress,
    )
    with PeakMemory(device) as peak:
        with _prepared(path, bilm, device, words, info) as run:
            for i in range(warmup):
                run(inputs[i % len(inputs)])
                bar.update(1)
            for _ in range(repeats):
                with Stopwatch(device) as clock:
                    outputs = []
                    for x in inputs:
                        outputs.append(run(x))
                        bar.update(1)
                pass_seconds.append(clock.seconds)
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
    batch_size: int = 32,
    seq_len: int = 25,
    n_batches: int = 4,
    warmup: int = 1,
    repeats: int = 2,
    device: str = "all",
    threads: Optional[int] = None,
    isolate: bool = True,
    progress: bool = True,
) -> Dict[str, Any]:
    threads = threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    model_dir = cached_model(workdir, shape, seed, progress=progress)
    lines = text_lines(text)
    sentences = sentence_batches(lines, batch_size, seq_len, n_batches)
    batches = [batch_to_ids(batch) for batch in sentences]
    words = sorted({w for batch in sentences for sentence in batch for w in sentence})
    cache_words = words_by_frequency(lines)[:CACHE_WORDS]
    cached = set(cache_words)
    tokens = [w for batch in sentences for sentence in batch for w in sentence]
    real_tokens = len(tokens)
    padded = sum(len(batch) * max(len(s) for s in batch) for batch in sentences)
    masks = [torch.from_numpy((ids > 0).any(axis=-1)) for ids in batches]

    rows: List[Dict[str, Any]] = []
    for dev in resolve_devices(device):
        reference_row: Optional[Dict[str, Any]] = None
        reference_layers: List[torch.Tensor] = []
        paths = available_paths(dev)
        runs: Dict[str, List[Dict[str, Any]]] = {path: [] for path in paths}
        for round_no in range(repeats):
            # Rounds alternate the order, so that no path always runs first or last on a machine
            # whose load drifts; each run is one timed pass in a fresh process.
            for path in paths if round_no % 2 == 0 else paths[::-1]:
                runs[path].append(
                    run_isolated(
                        measure_path, path, str(model_dir), batches, cache_words, str(dev), warmup,
                        1, threads, progress, isolate=isolate,
                    )
                )
        for path in paths:
            measured = _best_of(runs[path])
            layers = [torch.from_numpy(x) for x in measured.pop("layers")]
            row: Dict[str, Any] = {"device": dev.type, "path": path, **measured}
            row["tokens_per_s"] = real_tokens / row["pass_s"]
            if path == REFERENCE:
                reference_row, reference_layers = row, layers
            else:
                row.update(_compare(layers, reference_layers, masks, precise=path not in (BF16, TF32)))
            row["speedup"] = ratio(row["tokens_per_s"], reference_row["tokens_per_s"])
            row["memory_ratio"] = ratio(row["peak_mb"], reference_row["peak_mb"])
            rows.append(row)
    return {
        "benchmark": "inference",
        "system": system_info(),
        "settings": {
            "shape": shape,
            "shape_source": shape_source(shape),
            "seed": seed,
            "text": str(text or default_text_path()),
            "batch_size": batch_size,
            "max_sequence_length": seq_len,
            "n_batches": n_batches,
            "warmup_batches": warmup,
            "timed_passes": repeats,
            "threads": threads,
            "isolated_processes": isolate,
            "exact_tolerance": EXACT_TOLERANCE,
        },
        "batches": {
            "sentences": sum(len(b) for b in sentences),
            "real_tokens": real_tokens,
            "padded_positions": padded,
            "padding_fraction": 1 - real_tokens / padded,
            "distinct_words": len(words),
            "cache_hit_rate": sum(w in cached for w in tokens) / real_tokens,
        },
        "model_mb": sum(f.stat().st_size for f in Path(model_dir).glob("*.safetensors")) / MB,
        "rows": rows,
    }


def _best_of(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One path's rounds: the fastest pass counts, every pass is kept, and the highest peak."""
    best = dict(min(runs, key=lambda run: run["pass_s"]))
    best["pass_all_s"] = [run["pass_s"] for run in runs]
    best["peak_mb"] = max(run["peak_mb"] for run in runs)
    return best


def _compare(
    layers: List[torch.Tensor], reference: List[torch.Tensor], masks: List[torch.Tensor], precise: bool
) -> Dict[str, Any]:
    per_layer = np.max([max_abs_differences(a, b) for a, b in zip(layers, reference)], axis=0)
    result: Dict[str, Any] = {
        "max_abs_diff_per_layer": [float(x) for x in per_layer],
        "max_abs_diff": float(per_layer.max()),
    }
    if precise:
        result["exact"] = bool(per_layer.max() < EXACT_TOLERANCE)
    else:
        a = torch.cat([x[:, m] for x, m in zip(layers, masks)], dim=1)[:, None]
        b = torch.cat([x[:, m] for x, m in zip(reference, masks)], dim=1)[:, None]
        mean, worst = top_layer_cosine(a, b, torch.ones(a.shape[1:3], dtype=torch.bool))
        result["top_layer_cosine_mean"] = mean
        result["top_layer_cosine_min"] = worst
    return result


INFERENCE_COLUMNS = [
    ("device", "device", ""),
    ("path", "path", ""),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("speedup", "x reference", ".2f"),
    ("peak_mb", "peak MB", ".1f"),
    ("memory_ratio", "mem x ref", ".2f"),
    ("max_abs_diff", "max |diff|", ".1e"),
    ("exact", "< 1e-5", ""),
    ("top_layer_cosine_mean", "top cos", ".5f"),
]
