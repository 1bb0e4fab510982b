"""``benchmarks embed``: the ``embed`` command as users run it, in subprocesses.

- Throughput: one process with 2 threads against ``torchrun --nproc-per-node 2`` with one thread
  per rank, on the same input and model, the order alternating over rounds (a drifting machine
  favours neither). Tokens/s end to end (interpreter start, model load and merge included, the
  wall time a user waits) and of the embedding alone (the command's own summary line), the
  merge's share of the wall time, and the peak resident memory (VmHWM) of every process.
- ``--soak``: one process through many tokens (a million by default) with its resident memory
  (VmRSS of ``/proc/PID/status``) sampled every few seconds: streaming must keep it flat. Growth
  = mean of the last quarter of the samples minus the mean of the first quarter, after the
  warm-up (the first tenth of the run: model load, first batches, the vocabulary filling up).

The input is the text's sentences (:func:`.text.sentences`: paragraphs cut at sentence ends, at
most ``MAX_SENTENCE`` tokens), one per line, until the token count is reached.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer

from spacy_elmo.bench import report
from spacy_elmo.bench.measure import MB, alternating, proc_status_kb
from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import text_lines
from spacy_elmo.cli import bench
from spacy_elmo.cli.errors import failing
from spacy_elmo.cli.weights import OPTIONS_FILE, WEIGHT_FILE, WEIGHTS, weight_source
from spacy_elmo.sources import weight_keys

from .subprocesses import descendants, package_argv, subprocess_env
from .text import sentences
from .workdir import bench_workdir

MAX_SENTENCE = 100
EMBED_COLUMNS: List[report.Column] = [
    ("round", "round", "d"),
    ("setup", "setup", ""),
    ("wall_s", "wall s", ".1f"),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("embed_tokens_per_s", "embedding tokens/s", ",.0f"),
    ("merge_s", "merge s", ".2f"),
    ("merge_share", "merge share", ".1%"),
    ("peak_rss_mb", "peak RSS MB per rank", ""),
]


def write_input(text: Optional[Path], n_tokens: int, path: Path) -> Tuple[int, int]:
    """``path``: sentences of ``text``, one per line, until ``n_tokens`` (cycling a short text);
    returns (sentences, tokens)."""
    lines = text_lines(text)
    written = tokens = 0
    with open(path, "w", encoding="utf-8") as out:
        while tokens < n_tokens:
            for sentence in sentences(lines, MAX_SENTENCE):
                out.write(" ".join(sentence) + "\n")
                written += 1
                tokens += len(sentence)
                if tokens >= n_tokens:
                    break
    return written, tokens


class TreeSampler:
    """Samples a process and its descendants from ``/proc`` every ``interval`` seconds: each
    one's peak RSS (VmHWM, exact whatever the interval) and rank (RANK= in its environment), and
    the root's current RSS (VmRSS) over time."""

    def __init__(self, pid: int, interval: float) -> None:
        self.pid = pid
        self.interval = interval
        self.start = time.perf_counter()
        self.peaks: Dict[int, float] = {}
        self.ranks: Dict[int, Optional[int]] = {}
        self.samples: List[Tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "TreeSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        for pid in [self.pid, *descendants(self.pid)]:
            status = _status(pid)
            if not status:
                continue
            if "VmHWM" in status:
                self.peaks[pid] = max(self.peaks.get(pid, 0.0), status["VmHWM"])
            if self.ranks.get(pid) is None:  # a child between fork and exec has its parent's environment
                self.ranks[pid] = _rank(pid)
            if pid == self.pid and "VmRSS" in status:
                self.samples.append((time.perf_counter() - self.start, status["VmRSS"]))

    def rank_peaks(self) -> List[float]:
        """Peak RSS (MB) of each rank, rank 0 first; a lone process (no RANK) is rank 0."""
        ranked = {rank: self.peaks[pid] for pid, rank in self.ranks.items() if rank is not None and pid in self.peaks}
        if not ranked and self.pid in self.peaks:
            return [self.peaks[self.pid]]
        return [ranked[rank] for rank in sorted(ranked)]


def _status(pid: int) -> Dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB; empty once it is gone."""
    found = {key: proc_status_kb(key, pid) for key in ("VmRSS", "VmHWM")}
    return {key: kb * 1024 / MB for key, kb in found.items() if kb is not None}


def _rank(pid: int) -> Optional[int]:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for entry in environ:
        if entry.startswith(b"RANK="):
            return int(entry[5:])
    return None


def embed_argv(
    processes: int, input_path: Path, output: Path, options: List[str], threads: int, torchrun: Optional[bool] = None
) -> List[str]:
    """The command line: ``python -m spacy_elmo embed``, under torchrun for several processes
    (or with ``torchrun=True``)."""
    args = ["embed", str(input_path), str(output), "--threads", str(threads), "--metrics", f"{output}.json", *options]
    return package_argv(args, processes, torchrun)


def run_embed(
    processes: int, threads: int, input_path: Path, output: Path, options: List[str], interval: float
) -> Dict[str, Any]:
    """One run of the command, sampled; its figures (or a ValueError with its error output)."""
    env = subprocess_env(threads)
    argv = embed_argv(processes, input_path, output, options, threads)
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
        with TreeSampler(process.pid, interval) as sampler:
            process.communicate()
        wall = time.perf_counter() - start
        if process.returncode != 0:
            errors.seek(0)
            raise ValueError(f"{' '.join(argv)} failed ({process.returncode}):\n{errors.read()[-3000:]}")
    output_mb = output.stat().st_size / MB
    output.unlink()  # measured: its size is in the row
    metrics = Path(f"{output}.json")
    figures = summary_figures(metrics)
    metrics.unlink()
    return {
        "setup": f"{processes} process{'es' if processes > 1 else ''} x {threads} thread{'s' if threads > 1 else ''}",
        "processes": processes,
        "threads": threads,
        **figures,
        "wall_s": wall,
        "tokens_per_s": figures["tokens"] / wall,
        "merge_share": figures["merge_s"] / wall,
        "peak_rss_mb_by_rank": [round(mb, 1) for mb in sampler.rank_peaks()],
        "peak_rss_mb": " / ".join(f"{mb:.0f}" for mb in sampler.rank_peaks()),
        "rss_samples": [(round(t, 1), round(mb, 1)) for t, mb in sampler.samples],
        "output_mb": output_mb,
    }


def summary_figures(metrics: Path) -> Dict[str, Any]:
    """Sentences, tokens, the embedding's seconds and tokens/s, and the merge's seconds, from the
    figures the command wrote (``embed --metrics``)."""
    figures = json.loads(metrics.read_text(encoding="utf-8"))
    embed_s = figures["embed_seconds"]
    return {
        "tokens": figures["tokens"],
        "sentences": figures["sentences"],
        "embed_s": embed_s,
        "embed_tokens_per_s": figures["embedded_tokens"] / embed_s if embed_s else None,
        "merge_s": figures["merge_seconds"],
    }


def run_throughput(
    input_path: Path, workdir: Path, options: List[str], rounds: int, interval: float
) -> List[Dict[str, Any]]:
    """1 x 2 threads and 2 x 1 thread, alternating which goes first."""
    rows = []

    def one(setup: Tuple[int, int], round_: int) -> None:
        processes, threads = setup
        row = run_embed(processes, threads, input_path, workdir / f"bench-{processes}.hdf5", options, interval)
        row.pop("rss_samples")
        rows.append({"round": round_ + 1, **row})

    alternating([(1, 2), (2, 1)], rounds, one)
    return rows


def soak_growth(samples: List[Tuple[float, float]]) -> Dict[str, Any]:
    """After the warm-up (first tenth of the samples), last-quarter mean minus first-quarter mean."""
    steady = samples[max(1, len(samples) // 10) :]
    if len(steady) < 4:
        return {"growth_mb": None, "steady_samples": len(steady)}
    quarter = len(steady) // 4
    first = sum(mb for _, mb in steady[:quarter]) / quarter
    last = sum(mb for _, mb in steady[-quarter:]) / quarter
    return {
        "growth_mb": last - first,
        "first_quarter_mb": first,
        "last_quarter_mb": last,
        "steady_min_mb": min(mb for _, mb in steady),
        "steady_max_mb": max(mb for _, mb in steady),
        "steady_samples": len(steady),
    }


def embed_bench_command(
    text: Path = bench.TEXT,
    weights: Optional[str] = WEIGHTS,
    options_file: Optional[Path] = OPTIONS_FILE,
    weight_file: Optional[Path] = WEIGHT_FILE,
    tokens: Optional[int] = typer.Option(
        None, "--tokens", min=1, help="Tokens to embed per run (default: 50,000; with --soak 1,000,000)"
    ),
    rounds: int = typer.Option(2, "--rounds", min=1, help="Rounds; each runs both setups, the order alternating"),
    layers: str = typer.Option("all", "--layers", help="embed's --layers: all, top or average"),
    chunk_size: int = typer.Option(1000, "--chunk-size", min=1, help="embed's --chunk-size"),
    soak: bool = typer.Option(
        False, "--soak", help="Instead: one process through --tokens tokens, its resident memory sampled (must stay flat)"
    ),
    soak_threads: int = typer.Option(1, "--soak-threads", min=1, help="Threads of the --soak process"),
    interval: float = typer.Option(
        2.0, "--interval", help="Seconds between memory samples (peaks are exact whatever the interval)"
    ),
    workdir: Optional[Path] = typer.Option(
        None, "--workdir", help="Where the input and outputs go (default: a temporary directory, removed after)"
    ),
    output: Optional[Path] = bench.OUTPUT,
) -> None:
    """The embed command: 1 process x 2 threads against torchrun 2 processes x 1 thread.

    Both run as subprocesses on the same input (the text's sentences, one per line) and model
    (default: the bundled one), the order alternating over rounds; tokens/s end to end and of the
    embedding alone, the merge's share of the wall time and each rank's peak RSS. With --soak:
    one process through a million tokens, its resident memory sampled, and the growth after the
    warm-up (last quarter mean minus first quarter mean).
    """
    weight_source(weights, options_file, weight_file)  # exits with the resolver's error
    keys = weight_keys(weights, options_file, weight_file)
    model = [arg for key, value in keys.items() if value is not None for arg in (f"--{key.replace('_', '-')}", value)]
    options = [*model, "--layers", layers, "--chunk-size", str(chunk_size)]
    n_tokens = tokens or (1_000_000 if soak else 50_000)
    result: Dict[str, Any] = {
        "settings": {
            "text": str(text), "tokens": n_tokens, "model": " ".join(model) or "the bundled model",
            "layers": layers, "chunk_size": chunk_size, "interval_s": interval,
        }
    }
    with failing(ValueError, FileNotFoundError), bench_workdir(workdir, "spacy-elmo-embed-bench-") as directory:
        input_path = directory / "input.txt"
        n_sentences, n_written = write_input(text, n_tokens, input_path)
        result["settings"].update(sentences=n_sentences, tokens=n_written)
        typer.echo(f"input: {n_sentences:,} sentences, {n_written:,} tokens of {text}")
        if soak:
            result.update(_soak(input_path, directory, options, soak_threads, interval))
        else:
            result["rows"] = run_throughput(input_path, directory, options, rounds, interval)
    if soak:
        _echo_soak(result)
    else:
        _echo_throughput(result)
    result["system"] = system_info()
    report.finish(result, output)


def _soak(input_path: Path, directory: Path, options: List[str], threads: int, interval: float) -> Dict[str, Any]:
    output = directory / "soak.hdf5"
    row = run_embed(1, threads, input_path, output, options, interval)
    return {"soak": row, "growth": soak_growth(row["rss_samples"])}


def _echo_soak(result: Dict[str, Any]) -> None:
    row, growth = result["soak"], result["growth"]
    samples = row["rss_samples"]
    typer.echo(
        f"\nsoak: {row['tokens']:,} tokens in {row['wall_s']:.0f} s ({row['tokens_per_s']:,.0f} tokens/s end to end), "
        f"{row['setup']}, merge {row['merge_s']:.1f} s, output {row['output_mb']:,.0f} MB"
    )
    typer.echo("RSS samples (s: MB): " + ", ".join(f"{t:.0f}: {mb:.0f}" for t, mb in samples))
    if growth["growth_mb"] is None:
        typer.echo(f"too few samples after the warm-up ({growth['steady_samples']}) to measure growth")
        return
    typer.echo(
        f"after the warm-up: first quarter {growth['first_quarter_mb']:.1f} MB, last quarter "
        f"{growth['last_quarter_mb']:.1f} MB: growth {growth['growth_mb']:+.1f} MB "
        f"(range {growth['steady_min_mb']:.0f}-{growth['steady_max_mb']:.0f} MB, peak {row['peak_rss_mb']} MB)"
    )


def _echo_throughput(result: Dict[str, Any]) -> None:
    rows = result["rows"]
    s = result["settings"]
    report.echo_table(
        f"embed, {s['tokens']:,} tokens ({s['sentences']:,} sentences), {s['model']}, --layers "
        f"{s['layers']}, chunks of {s['chunk_size']}",
        rows,
        EMBED_COLUMNS,
    )
    best = {}
    for row in rows:
        best[row["setup"]] = max(best.get(row["setup"], 0.0), row["tokens_per_s"])
    one, two = best.get("1 process x 2 threads"), best.get("2 processes x 1 thread")
    result["best_tokens_per_s"] = best
    result["ratio_2x1_over_1x2"] = report.ratio(two, one)
    typer.echo(
        "tokens/s = tokens / wall time of the command (start, model load and merge included); "
        "embedding tokens/s = the command's own figure (work only); best of each: "
        + ", ".join(f"{k} {v:,.0f}" for k, v in best.items())
        + (f"; 2 x 1 / 1 x 2 = {result['ratio_2x1_over_1x2']:.2f}" if result["ratio_2x1_over_1x2"] else "")
    )
