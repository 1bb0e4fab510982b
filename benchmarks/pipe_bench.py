"""``benchmarks pipe``: the elmo pipe end to end. Its tokens/s and peak memory per precision and
thread count are the package's own bench (``python -m spacy_elmo bench``,
:mod:`spacy_elmo.cli.bench`: each cell in a fresh process, the order alternating over rounds); the
kit adds what only it measures:

- ``--random-shape``: random weights of a named shape (:mod:`.shapes`) instead of trained ones;
- ``--doc-tokens``: docs without sentence boundaries, one per length, instead of batches of docs:
  does the pipe's memory grow with the doc or with its windows?

A doc without sentence boundaries is cut into windows of ``max_sequence_length`` tokens, run in
batches of at most ``max_batch_tokens`` padded tokens (both settings of the pipe's model block).
The pipe must keep its outputs (the layers and the mix of every token), so memory grows with the
doc by exactly their size; everything else (the biLM's activations, character ids, batch tensors)
should be bounded by the batch size. Each doc runs in a fresh process: build the pipeline, prime
it on other words, then measure the peak increase of ``elmo(doc)`` (RSS, or GPU memory with
``--gpu-id``). ``beyond outputs`` is that peak minus the bytes of ``doc._.elmo`` and
``doc._.elmo_layers``: the working memory, which should stay flat as the doc grows once the doc
fills whole batches (a short doc runs one smaller batch, so it needs less).

Two allocator settings, because RSS is not only live memory: with glibc's default (dynamic) mmap
threshold, the per-window arrays freed after each batch stay in the heap, fragmented, and the
RSS peak creeps up with the doc although nothing more is alive. With a fixed threshold
(``MALLOC_MMAP_THRESHOLD_=131072``) large blocks go back to the OS when freed, so the peak is
close to the live working memory. ``default`` is what users see; ``fixed-mmap`` is the pipe's own
footprint. The pipe's layer cache (``cache_size_mb``) keeps a copy of every window's layers up to
its limit; it is off here unless ``--cache-size-mb`` says otherwise (repeat it to compare).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from spacy_elmo.bench.isolate import run_isolated
from spacy_elmo.bench.measure import MB, PeakMemory, current_rss_bytes
from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import text_lines

from .text import token_stream
from .timing import Stopwatch

ALLOCATORS: Dict[str, Dict[str, str]] = {
    "default": {},
    "fixed-mmap": {"MALLOC_MMAP_THRESHOLD_": "131072"},
}


def measure_doc(
    model: Dict[str, Any], n_tokens: int, text: Optional[str], cache_size_mb: int, gpu_id: int = -1
) -> Dict[str, Any]:
    """Peak memory of the elmo pipe (``model``: its model block) on one doc of ``n_tokens``
    tokens without sentence boundaries, meant to run in a fresh process; PyTorch on one op
    thread, as in the package's bench."""
    import spacy
    import torch
    from spacy.tokens import Doc

    from spacy_elmo import pipe  # noqa: F401  registers the factory where no entry point does (a checkout)

    torch.set_num_threads(1)
    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo", config={"model": model, "cache_size_mb": cache_size_mb})
    nlp.initialize()
    device = next(elmo.bilm.parameters()).device
    words = token_stream(text_lines(Path(text) if text else None), n_tokens + 300)
    elmo(Doc(nlp.vocab, words=words[n_tokens:]))  # priming, on other words
    loaded = current_rss_bytes()  # the process with the pipeline loaded and run once
    if elmo.cache is not None:
        elmo.cache.clear()
    doc = Doc(nlp.vocab, words=words[:n_tokens])
    with PeakMemory(device) as peak, Stopwatch(device) as clock:
        elmo(doc)
    outputs = doc._.elmo.nbytes + (0 if doc._.elmo_layers is None else doc._.elmo_layers.nbytes)
    settings = elmo.settings
    return {
        "precision": settings.precision,
        "threads": settings.threads,
        "loaded_rss_mb": None if loaded is None else loaded / MB,
        "tokens": n_tokens,
        "windows": math.ceil(n_tokens / settings.max_sequence_length),
        "elmo_s": clock.seconds,
        "tokens_per_s": n_tokens / clock.seconds,
        "peak_mb": peak.mb,
        "peak_total_mb": peak.total / MB,
        "outputs_mb": outputs / MB,
        "beyond_outputs_mb": (peak.bytes - outputs) / MB,
        "max_sequence_length": settings.max_sequence_length,
        "max_batch_tokens": settings.max_batch_tokens,
        "layer_cache_mb": 0.0 if elmo.cache is None else elmo.cache.nbytes / MB,
        "peak_method": peak.method,
    }


def run_doc_bench(
    model: Dict[str, Any],
    sizes: Sequence[int],
    precisions: Sequence[str] = ("fp32",),
    threads: Sequence[Any] = ("auto",),
    cache_sizes_mb: Sequence[int] = (0,),
    allocators: Sequence[str] = ("default", "fixed-mmap"),
    text: Optional[Path] = None,
    gpu_id: int = -1,
    isolate: bool = True,
) -> Dict[str, Any]:
    """Every allocator x precision x threads x cache size x doc length, each in a fresh process
    (``isolate``; without it the allocator setting does not apply)."""
    unknown = [a for a in allocators if a not in ALLOCATORS]
    if unknown:
        raise ValueError(f"unknown allocator setting {unknown}; choose from {list(ALLOCATORS)}")
    rows: List[Dict[str, Any]] = []
    for allocator in allocators:
        for precision in precisions:
            for count in threads:
                for cache_mb in cache_sizes_mb:
                    for n in sizes:
                        block = {**model, "precision": precision, "threads": count}
                        row = run_isolated(measure_doc, block, n, str(text) if text else None, cache_mb, gpu_id,
                                           isolate=isolate, env=ALLOCATORS[allocator])  # fmt: skip
                        rows.append({"allocator": allocator if isolate else "in-process", "cache_size_mb": cache_mb, **row})
    return {
        "benchmark": "pipe --doc-tokens",
        "system": system_info(),
        "settings": {"model": model, "sizes": list(sizes), "allocators": {a: ALLOCATORS[a] for a in allocators},
                     "isolated_processes": isolate, "text": str(text), "gpu_id": gpu_id},  # fmt: skip
        "rows": rows,
    }


DOC_COLUMNS = [
    ("allocator", "allocator", ""),
    ("precision", "precision", ""),
    ("threads", "threads", ""),
    ("loaded_rss_mb", "loaded RSS MB", ".0f"),
    ("cache_size_mb", "cache_size_mb", ""),
    ("tokens", "tokens", ","),
    ("windows", "windows", ","),
    ("peak_mb", "peak MB", ".1f"),
    ("outputs_mb", "outputs MB", ".1f"),
    ("beyond_outputs_mb", "beyond outputs MB", ".1f"),
    ("layer_cache_mb", "cache held MB", ".1f"),
]
