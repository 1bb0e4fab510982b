"""``python -m spacy_elmo bench``: tokens/s and peak memory of the elmo pipe per precision and
thread count, on the user's machine and text, sized like ``spacy benchmark speed``. Each cell runs
in a fresh process (its threads and memory its own), the order reversed every other round so that
drift favours none; ratios are to the first cell of the same run. docs/guide/speed.md.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import typer

from ..bench import report
from ..bench.isolate import ProcessDied, run_isolated
from ..bench.measure import MB, PeakMemory, alternating, current_rss_bytes
from ..bench.system import system_info
from ..bench.text import DEFAULT_TEXT, text_lines
from ..nn.threads import Threads
from .errors import fail, failing
from .weights import OPTIONS_FILE, WEIGHT_FILE, WEIGHTS, checked_precision, weight_settings, weight_source

Cell = Tuple[str, Threads]

COLUMNS = [
    ("precision", "precision", ""),
    ("threads", "threads", ""),
    ("tokens", "tokens", ","),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("x_first", "x first", ".2f"),
    ("loaded_mb", "loaded MB", ",.0f"),
    ("peak_mb", "peak +MB", ",.0f"),
]


@dataclass(frozen=True)
class Workload:
    """What every cell runs: a saved pipeline and its elmo component, or None (blank English +
    sentencizer + elmo with ``model``), the docs, batch sizes and GPU (-1: CPU)."""

    pipeline: Optional[Path]
    component: str
    model: Optional[Dict[str, Optional[str]]]
    texts: List[str]
    batch_size: int
    warmup: int
    gpu_id: int = -1


def _precisions(value: Union[str, List[str]]) -> List[str]:
    if isinstance(value, list):  # already parsed (typer runs callbacks on defaults too)
        return value
    return [checked_precision(name.strip()) for name in value.split(",")]


def _thread_counts(value: Union[str, List[Threads]]) -> List[Threads]:
    if isinstance(value, list):
        return value
    counts: List[Threads] = []
    for item in (part.strip() for part in value.split(",")):
        number = int(item) if item.lstrip("-").isdigit() else 0
        if item != "auto" and number < 1:
            raise typer.BadParameter(
                "takes auto or integers greater than or equal to 1, separated by commas (e.g. "
                f"auto,1,2), got {value!r}",
                param_hint="'--threads'",
            )
        counts.append(item if item == "auto" else number)
    return counts


#: The bench's options, shared with the checkout's ``benchmarks pipe`` (which runs this bench).
PRECISIONS = typer.Option(
    "fp32,int8", "--precision", callback=_precisions,
    help="The elmo model block's precisions to compare, comma-separated",
)
THREADS = typer.Option(
    "auto", "--threads", callback=_thread_counts,
    help="The elmo model block's thread counts to compare, comma-separated (auto or >= 1)",
)
TEXT = typer.Option(
    DEFAULT_TEXT, "--text", show_default=False,
    help=f"Text, a doc per line (default: {DEFAULT_TEXT.name}, shipped with the package)",
)
BATCH_SIZE = typer.Option(32, "--batch-size", min=1, help="Docs per nlp.pipe batch")
WARMUP = typer.Option(1, "--warmup", min=0, help="Untimed batches first")
BATCHES = typer.Option(4, "--batches", min=1, help="Timed batches per cell")
ROUNDS = typer.Option(2, "--rounds", min=1, help="Runs of every cell; the best counts")
GPU_ID = typer.Option(-1, "--gpu-id", help="GPU for spaCy and the biLM; -1 for the CPU")
OUTPUT = typer.Option(None, "--output", "-o", help="Write every figure to this JSON file")


def bench_command(
    pipeline: Optional[Path] = typer.Argument(
        None,
        help="A saved pipeline directory with an elmo pipe (default: blank English + sentencizer "
        "+ elmo with the weights the weight options name)",
        show_default=False,
    ),
    weights: Optional[str] = WEIGHTS,
    options_file: Optional[Path] = OPTIONS_FILE,
    weight_file: Optional[Path] = WEIGHT_FILE,
    precisions: str = PRECISIONS,
    threads: str = THREADS,
    text: Path = TEXT,
    batch_size: int = BATCH_SIZE,
    warmup: int = WARMUP,
    batches: int = BATCHES,
    rounds: int = ROUNDS,
    gpu_id: int = GPU_ID,
    output: Optional[Path] = OUTPUT,
) -> None:
    """Measure the elmo pipe's tokens/s and peak memory on this machine, per precision and
    thread count, each cell in a fresh process; ratios are to the first cell."""
    if pipeline is not None and (weights or options_file or weight_file):
        fail("PIPELINE brings its own weights: give it or --weights/--options-file/--weight-file")
    model = None if pipeline is not None else weight_settings(weights, options_file, weight_file)
    measured = str(pipeline) if pipeline is not None else weight_source(weights, options_file, weight_file).describe()
    run_bench(pipeline, model, measured, precisions, threads, text, batch_size, warmup, batches, rounds, gpu_id, output)


def run_bench(
    pipeline: Optional[Path], model: Optional[Dict[str, Optional[str]]], measured: str, precisions: List[str],
    threads: List[Threads], text: Path, batch_size: int, warmup: int, batches: int, rounds: int, gpu_id: int,
    output: Optional[Path],
) -> None:
    """The bench once the weights are resolved (``measured`` says which): the cells, the table
    and ``output``; exits with the error line of what cannot run."""
    typer.echo(f"measuring: {measured}")
    component = "elmo" if pipeline is None else _elmo_component(pipeline)
    device = _device(gpu_id, precisions)
    with failing(OSError, ValueError):
        lines = text_lines(text)
    texts = [lines[i % len(lines)] for i in range((warmup + batches) * batch_size)]
    work = Workload(pipeline, component, model, texts, batch_size, warmup, gpu_id)
    try:
        rows = measure_cells(work, [(p, t) for p in precisions for t in threads], rounds)
    except (OSError, ValueError) as err:  # a weight file or pipeline that does not load
        fail(str(err))
    except ProcessDied:
        fail("a cell's process ended without a result (killed, or out of memory); try fewer --batch-size docs")
    described = str(pipeline) if pipeline is not None else "blank en + sentencizer + elmo"
    settings = {
        "pipeline": described, "model": model, "weights": measured if pipeline is None else None,
        "text": str(text), "batch_size": batch_size, "warmup_batches": warmup, "timed_batches": batches,
        "rounds": rounds, "device": str(device),
    }
    _report(settings, rows, output)


def _device(gpu_id: int, precisions: List[str]):
    """The torch device of ``--gpu-id``, where every precision runs, or exit saying which not."""
    import torch

    from ..nn.precision import runs_on

    if gpu_id >= 0 and not torch.cuda.is_available():
        fail(f"--gpu-id {gpu_id}: PyTorch {torch.__version__} sees no CUDA device")
    device = torch.device(f"cuda:{gpu_id}" if gpu_id >= 0 else "cpu")
    for name in precisions:
        if not runs_on(name, device):
            fail(f"--precision {name} does not run on {device}: compare others, e.g. --precision fp32,bf16")
    return device


def _report(settings: Dict[str, Any], rows: List[Dict[str, Any]], output: Optional[Path]) -> None:
    """The table, what its memory columns mean, the system; every figure to ``output``."""
    result = {"benchmark": "bench", "settings": settings, "cells": rows, "system": system_info()}
    s = settings
    report.echo_table(
        f"{s['pipeline']} on {s['device']}: {s['timed_batches']} timed batches of {s['batch_size']} "
        f"docs after {s['warmup_batches']} warm-up, best of {s['rounds']} round(s), each cell in a "
        "fresh process",
        rows,
        COLUMNS,
    )
    typer.echo(
        "loaded MB = resident memory with the pipeline loaded and warmed up; peak +MB = the peak "
        f"above it while timed ({rows[0]['peak_method']})"
    )
    report.finish(result, output)


def _elmo_component(pipeline: Path) -> str:
    """The saved pipeline's elmo component's name, or exit naming the problem."""
    from spacy.util import load_config

    if not (pipeline / "config.cfg").is_file():
        fail(f"{pipeline}: not a saved pipeline (no config.cfg); save one with nlp.to_disk(PATH)")
    components = load_config(pipeline / "config.cfg")["components"]
    names = [name for name, block in components.items() if block.get("factory") == "elmo"]
    if not names:
        fail(f"{pipeline}: no elmo pipe among its components ({', '.join(components) or 'none'})")
    return names[0]


def measure_cells(work: Workload, cells: List[Cell], rounds: int) -> List[Dict[str, Any]]:
    """Every cell ``rounds`` times in fresh processes: best runs, all runs, ratios to the first."""
    def one(cell: Cell, round_: int) -> Dict[str, Any]:
        run = run_isolated(run_cell, work, *cell)  # a fresh process: its threads and memory its own
        typer.echo(f"round {round_ + 1}/{rounds}: {cell[0]}, threads {cell[1]}: {run['tokens_per_s']:,.0f} tokens/s")
        return run

    runs = alternating(cells, rounds, one)
    rows = []
    for cell in cells:
        best = max(runs[cell], key=lambda run: run["tokens_per_s"])
        rows.append({
            **best,
            "rounds_tokens_per_s": [run["tokens_per_s"] for run in runs[cell]],
            "process_ids": [run["process_id"] for run in runs[cell]],
        })
    for row in rows:
        row["x_first"] = report.ratio(row["tokens_per_s"], rows[0]["tokens_per_s"])
    return rows


def run_cell(work: Workload, precision: str, threads: Threads) -> Dict[str, Any]:
    """Load the pipeline with ``precision`` and ``threads``, warm up, time the batches; PyTorch on
    one op thread, so ``threads`` is what the biLM splits over."""
    import spacy
    import torch
    from spacy.util import minibatch

    from .. import pipe  # noqa: F401  registers the factory where no entry point does (a checkout)

    torch.set_num_threads(1)
    if work.gpu_id >= 0:
        spacy.require_gpu(work.gpu_id)
    device = torch.device(f"cuda:{work.gpu_id}" if work.gpu_id >= 0 else "cpu")
    settings = {"precision": precision, "threads": threads}
    if work.pipeline is None:
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        nlp.add_pipe("elmo", config={"model": {**(work.model or {}), **settings}}).initialize()
    else:
        nlp = spacy.load(work.pipeline, config={"components": {work.component: {"model": settings}}})
    size = work.batch_size
    batches = list(minibatch(work.texts, size))
    for batch in batches[: work.warmup]:
        list(nlp.pipe(batch, batch_size=size))
    loaded = current_rss_bytes() or 0
    seconds, tokens = [], 0
    with PeakMemory(device) as peak:
        for batch in batches[work.warmup :]:
            start = time.perf_counter()
            tokens += sum(len(doc) for doc in nlp.pipe(batch, batch_size=size))
            seconds.append(time.perf_counter() - start)
    block = nlp.config["components"][work.component]["model"]
    return {
        "precision": precision,
        "threads": threads,
        "model_block": {key: block[key] for key in settings},  # as the loaded pipeline holds them
        "process_id": os.getpid(),
        "docs": len(work.texts) - work.warmup * size,
        "tokens": tokens,
        "seconds": sum(seconds),
        "batch_seconds": seconds,
        "tokens_per_s": tokens / sum(seconds),
        "loaded_mb": loaded / MB,
        "peak_mb": peak.mb,
        "peak_method": peak.method,
    }
