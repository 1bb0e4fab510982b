"""``benchmarks pretrain-ab``: this checkout's pretraining step against another checkout's (an
older commit: ``git worktree add ../old COMMIT``), on the same batches, in alternating fresh
processes, as ratios measured in one run.

``benchmarks pretrain`` measures one checkout in steady state; a speed-up between two commits
needs both trainers on the same batches, each in its own process (its own package on
``PYTHONPATH``), in the order A B, B A, ... . The child side of this file (``--child``) uses only
what both trainers have had since the first release: ``Trainer`` and ``parse_settings``;
``Trainer.batches`` where it exists (windows too), else its stream and ``make_batch``;
``train_step`` returns the loss as floats (older) or device tensors (now), and this side never
reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Optional

#: The pretraining recipe of the project, which ``--config`` defaults to.
PROJECT_RECIPE = Path(__file__).resolve().parents[1] / "project" / "configs" / "pretrain_wikitext2.cfg"


def run_pretrain_ab(
    against: Path,
    text: Path,
    config: Path = PROJECT_RECIPE,
    overrides: Optional[Dict[str, Any]] = None,
    threads: int = 2,
    steps: int = 15,
    warmup: int = 3,
    rounds: int = 4,
    timeout_s: float = 900.0,
    gpu_id: int = -1,
) -> Dict[str, Any]:
    """``rounds`` runs of each checkout ("this" and "against"), alternating which goes first;
    each run a fresh process that builds ``warmup + steps`` batches of ``text`` under ``config``
    (with ``overrides``), takes ``warmup`` untimed steps and times ``steps`` (on GPU ``gpu_id``
    if >= 0, each step waited for). Returns every run, each side's median tokens/s, their ratio,
    and the median of the step-by-step ratios."""
    from spacy_elmo.bench.measure import alternating
    from spacy_elmo.bench.system import system_info

    from .timing import medians_and_ratios

    this = Path(__file__).resolve().parents[1]
    against = Path(against).resolve()
    if not (against / "spacy_elmo" / "pretrain").is_dir():
        raise ValueError(f"--against {against}: not a checkout of spacy_elmo (no spacy_elmo/pretrain in it)")
    text, config = Path(text).resolve(), Path(config).resolve()  # each run starts in its checkout
    for option, path in (("--text", text), ("--config", config)):
        if not path.is_file():
            raise ValueError(f"{option} {path}: no such file")
    with tempfile.TemporaryDirectory(prefix="spacy-elmo-pretrain-ab-") as tmp:
        settings = {**(overrides or {}), "paths.train": str(text), "paths.dev": None, "system.threads": threads}
        vocab = Path(tmp) / "this-0" / "vocab.txt"  # the first run counts the corpus; later runs read it

        def one(side: str, round_: int) -> Dict[str, Any]:
            run_settings = settings if round_ == 0 and side == "this" else {**settings, "paths.vocab": str(vocab)}
            checkout = this if side == "this" else against
            out = Path(tmp) / f"{side}-{round_}"
            return _child(checkout, config, run_settings, threads, warmup, steps, out, timeout_s, gpu_id)

        runs = alternating(["this", "against"], rounds, one)
    medians, ratios = medians_and_ratios({side: [r["tokens_per_s"] for r in found] for side, found in runs.items()}, "against")
    step_ratios = [
        mine / theirs
        for a, b in zip(runs["this"], runs["against"])
        for mine, theirs in zip(a["step_tokens_per_s"], b["step_tokens_per_s"])
    ]
    return {
        "benchmark": "pretrain-ab",
        "this": str(this),
        "against": str(against),
        "commits": {"this": _commit(this), "against": _commit(against)},
        "config": str(config),
        "overrides": overrides or {},
        "text": str(text),
        "threads": threads,
        "gpu_id": gpu_id,
        "warmup_steps": warmup,
        "timed_steps": steps,
        "rounds": rounds,
        "runs": runs,
        "median_tokens_per_s": medians,
        "ratio_of_medians": ratios["this"],
        "step_by_step_ratio_median": statistics.median(step_ratios),
        "system": system_info(),
    }


def _commit(checkout: Path) -> Optional[str]:
    """The checkout's commit, with ``-dirty`` when it has changes (None: not a git checkout)."""
    done = subprocess.run(["git", "-C", str(checkout), "describe", "--always", "--dirty", "--abbrev=12"],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() or None if done.returncode == 0 else None


def _child(checkout: Path, config: Path, settings: Dict[str, Any], threads: int, warmup: int, steps: int,
           out: Path, timeout_s: float, gpu_id: int) -> Dict[str, Any]:  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, __file__, "--child", str(config), json.dumps(settings), str(warmup), str(steps), str(out),
            str(gpu_id)]  # fmt: skip
    done = subprocess.run(argv, env=env, cwd=checkout, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"the run of {checkout} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child_main(config: str, settings: str, warmup: str, steps: str, out: str, gpu_id: str) -> None:
    """One run, in the checkout on ``PYTHONPATH``: prints its figures as one JSON line."""
    import torch
    from confection import Config

    from spacy_elmo.pretrain.config import parse_settings
    from spacy_elmo.pretrain.model import make_batch
    from spacy_elmo.pretrain.trainer import Trainer

    trainer = Trainer(parse_settings(Config().from_disk(config, overrides=json.loads(settings))), Path(out),
                      gpu_id=int(gpu_id), show_progress=False)  # fmt: skip
    wait = torch.cuda.synchronize if trainer.device.type == "cuda" else lambda: None  # a step's work, done
    if hasattr(trainer, "batches"):  # windows or sentences, as ``train`` feeds them
        stream = trainer.batches()
    else:  # a checkout from before windows: sentence batches only
        stream = (make_batch(item, trainer.vocab) for item in trainer.stream.batches())
    batches = [next(stream) for _ in range(int(warmup) + int(steps))]
    for batch in batches[: int(warmup)]:
        trainer.train_step(batch)
    times, tokens = [], []
    wait()
    for batch in batches[int(warmup):]:
        start = time.perf_counter()
        _, count = trainer.train_step(batch)
        wait()
        times.append(time.perf_counter() - start)
        tokens.append(count // 2)  # predictions per direction, as the trainer logs them
    print(json.dumps({
        "tokens_per_s": sum(tokens) / sum(times),
        "step_tokens_per_s": [t / s for t, s in zip(tokens, times)],
        "threads": torch.get_num_threads(),
        "load_average_1min": os.getloadavg()[0],
    }))  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = ("CONFIG", "SETTINGS", "WARMUP", "STEPS", "OUT", "GPU_ID")
    parser.add_argument("--child", nargs=len(names), metavar=names, required=True)
    _child_main(*parser.parse_args().child)
