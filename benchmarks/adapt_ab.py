"""``benchmarks adapt-ab``: this checkout's ``adapt`` against another checkout's, the whole command
on the same text, in alternating fresh processes, as ratios measured in one run.

Each run is ``python -m spacy_elmo adapt`` with its checkout's package on ``PYTHONPATH`` (the
order A B, B A, ...), timed from start to exit; its ``adapt/summary.json`` gives the held-out
perplexity before and after, and a hash of its ``adapt/heldout.txt`` shows that both sides
scored the same held-out text.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

from spacy_elmo.bench.measure import alternating
from spacy_elmo.bench.system import system_info

from .pretrain_ab import _commit
from .timing import medians_and_ratios


def run_adapt_ab(
    against: Path,
    texts: Sequence[Path],
    source: str = "en_wikitext_small",
    threads: int = 2,
    rounds: int = 1,
    extra: Sequence[str] = (),
    timeout_s: float = 7200.0,
) -> Dict[str, Any]:
    """``rounds`` runs of ``adapt source texts OUT --threads threads --seed 0 *extra`` from each
    checkout ("this" and "against"), alternating which goes first. Returns every run (seconds,
    perplexities, updates, the load before and after), each side's median seconds and their
    ratio (against / this: how many times faster this checkout is)."""
    this = Path(__file__).resolve().parents[1]
    against = Path(against).resolve()
    if not (against / "spacy_elmo" / "pretrain" / "adapt.py").is_file():
        raise ValueError(f"--against {against}: not a checkout of spacy_elmo with adapt")
    texts = [Path(text).resolve() for text in texts]
    for text in texts:
        if not text.exists():
            raise ValueError(f"--text {text}: no such file or directory")
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-adapt-ab-") as tmp:

        def one(side: str, round_: int) -> Dict[str, Any]:
            checkout = this if side == "this" else against
            out = Path(tmp) / f"{side}-{round_}"
            argv = [sys.executable, "-m", "spacy_elmo", "adapt", source, *map(str, texts), str(out),
                    "--threads", str(threads), "--seed", "0", *extra]  # fmt: skip
            return _timed_run(checkout, argv, out, threads, timeout_s)

        runs = alternating(["this", "against"], rounds, one)
    medians, ratios = medians_and_ratios({side: [r["seconds"] for r in found] for side, found in runs.items()}, "this")
    return {
        "benchmark": "adapt-ab",
        "this": str(this),
        "against": str(against),
        "commits": {"this": _commit(this), "against": _commit(against)},
        "source": source,
        "texts": [str(text) for text in texts],
        "threads": threads,
        "extra_arguments": list(extra),
        "rounds": rounds,
        "runs": runs,
        "median_seconds": medians,
        "speedup": ratios["against"],
        "system": system_info(),
    }


def _timed_run(checkout: Path, argv: List[str], out: Path, threads: int, timeout_s: float) -> Dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=checkout, capture_output=True, text=True, timeout=timeout_s)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"adapt in {checkout} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    summary = json.loads((out / "adapt" / "summary.json").read_text(encoding="utf-8"))
    heldout = hashlib.sha1((out / "adapt" / "heldout.txt").read_bytes()).hexdigest()
    return {
        "seconds": seconds,
        "load_average_1min": [load_before, os.getloadavg()[0]],
        "heldout_sha1": heldout,
        **{key: summary[key] for key in ("train_tokens", "heldout_tokens", "ppl_before", "ppl_after", "steps", "best_step")},
    }
