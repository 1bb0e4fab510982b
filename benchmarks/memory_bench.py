"""``benchmarks memory``: does the elmo pipe's memory grow with the doc or with its windows?

A doc without sentence boundaries is cut into windows of ``max_sequence_length`` tokens, run in
batches of at most ``max_batch_tokens`` padded tokens (both settings of the pipe's model block).
The pipe must keep its outputs (the layers and the mix of every token), so memory grows with the
doc by exactly their size; everything else (the biLM's activations, character ids, batch tensors)
should be bounded by the batch size.

Each doc length runs in a fresh process (:mod:`.isolate`): build the pipeline, make the doc,
prime the pipe on a short doc, then measure the peak RSS increase of ``elmo(doc)`` (see
:mod:`.measure`). ``beyond outputs`` is that peak minus the bytes of ``doc._.elmo`` and
``doc._.elmo_layers``: the working memory, which should stay flat as the doc grows once the doc
fills whole batches (a short doc runs one smaller batch, so it needs less).

Two allocator settings, because RSS is not only live memory: with glibc's default (dynamic) mmap
threshold, the per-window arrays freed after each batch stay in the heap, fragmented, and the
RSS peak creeps up with the doc although nothing more is alive (``malloc_trim`` returns it). With
a fixed threshold (``MALLOC_MMAP_THRESHOLD_=131072``) large blocks go back to the OS when freed,
so the peak is close to the live working memory. ``default`` is what users see; ``fixed-mmap``
is the pipe's own footprint.

The pipe's layer cache (``cache_size_mb``, 512 MB in the default pipe config) keeps a copy of
every window's layers up to its limit, so with it on, memory grows with the doc up to that limit;
it is off by default here (``--cache-size-mb 0``) and can be measured beside (repeat the option).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
from tqdm import tqdm

from spacy_elmo.bench.isolate import run_isolated
from spacy_elmo.bench.measure import MB, PeakMemory, Stopwatch, current_rss_bytes
from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import default_text_path, text_lines

from .pipeline import ModelSource, elmo_pipeline
from .text import token_stream


def measure_doc(
    source: ModelSource,
    n_tokens: int,
    text: Optional[str],
    settings: Dict[str, Any],
    threads: int,
) -> Dict[str, Any]:
    """Peak memory of the elmo pipe on one doc of ``n_tokens`` tokens without sentence
    boundaries (meant to run in a fresh process), on the device the pipe's biLM is on: GPU
    memory after ``spacy.require_gpu()``."""
    from spacy.tokens import Doc

    torch.set_num_threads(threads)
    nlp = elmo_pipeline(source, settings=settings)
    elmo = nlp.get_pipe("elmo")
    device = next(elmo.bilm.parameters()).device
    words = token_stream(text_lines(Path(text) if text else None), n_tokens + 300)
    settings_used = elmo.settings  # the model block's
    elmo(Doc(nlp.vocab, words=words[n_tokens:]))  # priming, on other words
    loaded = current_rss_bytes()  # the process with the pipeline loaded and run once
    if getattr(elmo, "cache", None) is not None:
        elmo.cache.clear()
    doc = Doc(nlp.vocab, words=words[:n_tokens])
    assert not doc.has_annotation("SENT_START")
    with PeakMemory(device) as peak, Stopwatch(device) as clock:
        elmo(doc)
    outputs = doc._.elmo.nbytes + (0 if doc._.elmo_layers is None else doc._.elmo_layers.nbytes)
    cache = getattr(elmo, "cache", None)
    return {
        "precision": settings_used.precision,
        "loaded_rss_mb": None if loaded is None else loaded / MB,
        "tokens": n_tokens,
        "windows": math.ceil(n_tokens / settings_used.max_sequence_length),
        "elmo_s": clock.seconds,
        "tokens_per_s": n_tokens / clock.seconds,
        "peak_mb": peak.mb,
        "peak_total_mb": peak.total / MB,
        "outputs_mb": outputs / MB,
        "beyond_outputs_mb": (peak.bytes - outputs) / MB,
        "max_sequence_length": settings_used.max_sequence_length,
        "max_batch_tokens": settings_used.max_batch_tokens,
        "layer_cache_mb": 0.0 if cache is None else cache.nbytes / MB,
        "peak_method": peak.method,
    }


ALLOCATORS: Dict[str, Dict[str, str]] = {
    "default": {},
    "fixed-mmap": {"MALLOC_MMAP_THRESHOLD_": "131072"},
}


def run_memory_bench(
    source: ModelSource,
    sizes: Sequence[int] = (2500, 10000, 40000),
    cache_sizes_mb: Sequence[int] = (0,),
    allocators: Sequence[str] = ("default", "fixed-mmap"),
    precisions: Sequence[str] = ("fp32",),
    text: Optional[Path] = None,
    threads: Optional[int] = None,
    isolate: bool = True,
    progress: bool = True,
) -> Dict[str, Any]:
    threads = threads or torch.get_num_threads()
    rows: List[Dict[str, Any]] = []
    unknown = [a for a in allocators if a not in ALLOCATORS]
    if unknown:
        raise ValueError(f"unknown allocator setting {unknown}; choose from {list(ALLOCATORS)}")
    jobs = [(a, p, cache_mb, n) for a in allocators for p in precisions for cache_mb in cache_sizes_mb for n in sizes]
    for allocator, precision, cache_mb, n in tqdm(jobs, desc="memory", unit="doc", disable=not progress):
        settings = {"cache_size_mb": cache_mb, "precision": precision}
        row = run_isolated(
            measure_doc, source, n, str(text) if text else None, settings, threads,
            isolate=isolate, env=ALLOCATORS[allocator],
        )
        rows.append({"allocator": allocator if isolate else "in-process", "cache_size_mb": cache_mb, **row})
    return {
        "benchmark": "memory",
        "system": system_info(),
        "settings": {
            "model": source.to_dict(),
            "sizes": list(sizes),
            "cache_sizes_mb": list(cache_sizes_mb),
            "precisions": list(precisions),
            "allocators": {a: ALLOCATORS[a] for a in allocators},
            "threads": threads,
            "isolated_processes": isolate,
            "text": str(text or default_text_path()),
        },
        "rows": rows,
    }


MEMORY_COLUMNS = [
    ("allocator", "allocator", ""),
    ("precision", "precision", ""),
    ("loaded_rss_mb", "loaded RSS MB", ".0f"),
    ("cache_size_mb", "cache_size_mb", ""),
    ("tokens", "tokens", ","),
    ("windows", "windows", ","),
    ("peak_mb", "peak MB", ".1f"),
    ("outputs_mb", "outputs MB", ".1f"),
    ("beyond_outputs_mb", "beyond outputs MB", ".1f"),
    ("layer_cache_mb", "cache held MB", ".1f"),
]
