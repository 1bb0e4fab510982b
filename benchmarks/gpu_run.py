"""``python -m benchmarks gpu``: the GPU runs that no test and no other command makes, in stages
with deadlines.

GPU time is scarce, so the runs are prepared in the checkout and rehearsed on the CPU
(``--device cpu --smoke``: tiny shapes, a few steps), so that no GPU minute goes to a typo;
docs/gpu_run.md says how a session is planned. Each stage:

- runs its cases in turn, each wrapped: a failure is recorded with its traceback's tail and the
  next case runs;
- has a deadline (``deadline_s``): a case that would start after it is recorded as ``skipped:
  deadline``; a subprocess still running at it is stopped; an in-process case runs to its end,
  so the sizes below keep each well inside the deadline;
- writes ``OUT/<stage>.json`` (the machine, the sizes, every case) and ``OUT/<stage>.log`` (the
  log and the subprocesses' output), and prints one line per case.

Stages (``STAGES``): what no command of the kit or the package and no test with ``--device
cuda`` checks on a GPU. The lease's calls (``benchmarks/gpu_lease/``) run ``one-rank``, and call
``inference``, ``profile-step``, ``step-ab`` and pytest themselves (call 5 runs the whole suite
with ``--device cuda``: the pipe's outputs, ``spacy train`` through the listener and ``embed``
under torchrun are tests); the pipe's speed and memory on a GPU are ``python -m spacy_elmo bench
--gpu-id 0`` and ``benchmarks pipe --doc-tokens N --gpu-id 0``.

- ``one-rank``: ``torchrun --nproc-per-node 1`` (a process group, DDP) against one process, the
  bilm-tf recipe's pretraining steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from spacy_elmo.bench.system import system_info
from spacy_elmo.files import write_json_atomically

from .subprocesses import descendants, package_argv, subprocess_env

STAGES = ("one-rank",)
STAGE_CHOICES = (*STAGES, "all")
#: Characters of a subprocess's output kept in the stage log, and of an error in the JSON.
LOG_TAIL = 2_000_000
ERROR_TAIL = 3_000
#: Seconds a stopped subprocess gets to end its own workers (torchrun forwards SIGTERM).
GRACE_S = 15


@dataclass(frozen=True)
class Sizes:
    """How much each stage runs: ``FULL`` on the GPU, ``SMOKE`` to rehearse on 2 CPU cores."""

    tiny: bool  # the pretraining recipe with a tiny model (pretrain_bench.TINY)
    one_rank_steps: int


FULL = Sizes(tiny=False, one_rank_steps=60)
SMOKE = Sizes(tiny=True, one_rank_steps=4)


class Stage:
    """One stage's run: its deadline, its log, its scratch folder and its cases' records."""

    def __init__(
        self,
        name: str,
        device: torch.device,
        sizes: Sizes,
        deadline_s: float,
        workdir: Path,
        log: logging.Logger,
        echo: Callable[[str], None],
    ) -> None:
        self.name = name
        self.device = device
        self.sizes = sizes
        self.workdir = workdir
        self.log = log
        self.echo = echo
        self.deadline = time.monotonic() + deadline_s
        self.cases: List[Dict[str, Any]] = []
        #: Called after every case (``run_stage`` writes the stage's JSON so far).
        self.on_record: Callable[[], Any] = lambda: None

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def case(self, name: str, function: Callable[..., Dict[str, Any]], *args: Any) -> Dict[str, Any]:
        """Run ``function(self, *args)`` as the case ``name`` and record it: its figures, or its
        error (the stage goes on), or ``skipped: deadline``. A function may return ``ok: False``
        with an ``error`` for a case that ran but found a fault (failed tests, differing outputs).
        """
        if self.remaining() <= 0:
            record: Dict[str, Any] = {"case": name, "ok": False, "status": "skipped: deadline"}
            self._record(record, 0.0)
            return record
        self.log.info("case %s: start (%.0f s left)", name, self.remaining())
        start = time.perf_counter()
        try:
            result = function(self, *args)
        except Exception:  # recorded, and the stage goes on
            error = traceback.format_exc()
            self.log.info("case %s failed:\n%s", name, error)
            record = {"case": name, "ok": False, "status": "failed", "error": error[-ERROR_TAIL:]}
        else:
            ok = result.pop("ok", True)
            record = {"case": name, "ok": ok, "status": "ok" if ok else "failed", **result}
        self._record(record, time.perf_counter() - start)
        return record

    def _record(self, record: Dict[str, Any], seconds: float) -> None:
        record["seconds"] = round(seconds, 3)
        self.cases.append(record)
        summary = record.get("summary") or (record.get("error", "").strip().splitlines() or [""])[-1]
        line = f"{self.name} | {record['case']}: {record['status']} ({seconds:.1f} s)" + (f" | {summary}" if summary else "")
        self.log.info("%s", line)
        self.echo(line)
        self.on_record()

    def run(self, argv: Sequence[Any], env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> Tuple[Optional[int], str, float]:
        """Run ``argv`` (stdout and stderr together) until it ends or the deadline comes: returns
        (exit status, or None if it was stopped at the deadline; its output; seconds). The output
        goes to the stage log."""
        self.log.info("$ %s", " ".join(map(str, argv)))
        start = time.perf_counter()
        process = subprocess.Popen(
            list(map(str, argv)), cwd=cwd, env=env or subprocess_env(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=max(1.0, self.remaining()))
            code: Optional[int] = process.returncode
        except subprocess.TimeoutExpired:
            output = _stop(process)
            code = None
        seconds = time.perf_counter() - start
        self.log.info("(exit status %s after %.1f s)\n%s", code, seconds, output[-LOG_TAIL:])
        return code, output, seconds


def _stop(process: subprocess.Popen) -> str:
    """SIGINT to the process, its group and its descendants (torchrun's workers each run in a
    session of their own; pytest ends its session, writing its report), then SIGTERM and SIGKILL,
    each after ``GRACE_S``; returns what it wrote."""
    pids = [process.pid, *descendants(process.pid)]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        for kill, pid in [(os.killpg, process.pid), *((os.kill, pid) for pid in pids)]:
            try:
                kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            return process.communicate(timeout=GRACE_S)[0] or ""
        except subprocess.TimeoutExpired:
            continue
    return "(no output: the stopped processes still held it)"


def _gpu_id(device: torch.device) -> str:
    return "0" if device.type == "cuda" else "-1"


# ------------------------------------------------------------------------------------- one-rank


def _one_rank_against_one_process(stage: Stage, step: str) -> Dict[str, Any]:
    """``torchrun --nproc-per-node 1`` (a process group, DDP) against one process, the same
    steps of the bilm-tf recipe on windows, alternated A B A B: tokens/s of the last logged
    window of each run, and their ratio."""
    from spacy_elmo.bench.measure import alternating
    from spacy_elmo.bench.text import DEFAULT_TEXT
    from spacy_elmo.pretrain.config import config_text
    from spacy_elmo.pretrain.metrics import read_metrics

    from .pretrain_bench import TINY
    from .timing import medians_and_ratios

    steps = stage.sizes.one_rank_steps
    tiny = TINY if stage.sizes.tiny else {}
    config = stage.workdir / "bilm-tf.cfg"
    config.write_text(config_text("bilm-tf", {"paths.train": str(DEFAULT_TEXT), **tiny}), encoding="utf-8")
    overrides = {
        "vocab.size": 40_000 if not tiny else 500,
        "vocab.min_count": 1,
        "training.step": step,
        "training.max_steps": steps,
        "training.log_every": max(1, steps // 3),
        "training.eval_every": 10 * steps,
        "training.checkpoint_every": 10 * steps,
    }
    def run(name: str, round_: int) -> float:
        output = stage.workdir / f"one-rank-{step}-{name.replace(' ', '-')}-{round_}"
        argv: List[Any] = package_argv(["pretrain"], 1, torchrun=name.startswith("torchrun"))
        argv += [config, output, "--gpu-id", _gpu_id(stage.device)]
        if stage.device.type == "cpu":
            argv += ["--threads", 1]
        for key, value in overrides.items():
            argv += [f"--{key}", json.dumps(value) if not isinstance(value, str) else value]
        code, text, _ = stage.run(argv, env=subprocess_env(threads=1), cwd=stage.workdir)
        if code != 0:
            raise RuntimeError(f"{name} exited with {code}:\n{text[-ERROR_TAIL:]}")
        return [row for row in read_metrics(output) if "loss" in row][-1]["tokens_per_s"]

    runs = alternating(["one process", "torchrun 1 rank"], 2, run)
    medians, ratios = medians_and_ratios(runs, "one process")
    one, ranked, ratio = medians["one process"], medians["torchrun 1 rank"], ratios["torchrun 1 rank"]
    return {
        "step": step,
        "tokens_per_s": runs,
        "ratio_torchrun_to_one_process": ratio,
        "summary": f"step {step}: one process {one:,.0f} tok/s, torchrun 1 rank {ranked:,.0f} ({ratio:.2f}x)",
    }


def one_rank_stage(stage: Stage) -> None:
    step = "cuda_graph" if stage.device.type == "cuda" else "eager"
    stage.case(f"torchrun 1 rank against one process, {step}", _one_rank_against_one_process, step)


RUNNERS: Dict[str, Callable[[Stage], None]] = {"one-rank": one_rank_stage}


# ------------------------------------------------------------------------------------- the run


@contextlib.contextmanager
def _stage_log(name: str, path: Path) -> Iterator[logging.Logger]:
    """Plain lines with a time stamp in ``path`` (no progress bars: a log read afterwards)."""
    log = logging.getLogger(f"benchmarks.gpu.{name}")
    log.setLevel(logging.INFO)
    log.propagate = False
    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(handler)
    try:
        yield log
    finally:
        log.removeHandler(handler)
        handler.close()


def run_stage(
    name: str,
    out: Path,
    device: str = "cuda",
    smoke: bool = False,
    deadline_s: float = 420.0,
    echo: Callable[[str], None] = print,
) -> Path:
    """Run one stage and write ``out/<name>.json`` and ``out/<name>.log``; returns the JSON's
    path. Failures inside are recorded in it, never raised."""
    if name not in RUNNERS:
        raise ValueError(f"--stage must be one of {', '.join(STAGE_CHOICES)}, got {name!r}")
    out.mkdir(parents=True, exist_ok=True)
    sizes = SMOKE if smoke else FULL
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    start = time.perf_counter()
    system = system_info()
    path = out / f"{name}.json"

    def write(complete: bool) -> Dict[str, Any]:
        """The stage's JSON as it stands (after every case: a cut run keeps what it measured)."""
        cases = stage.cases
        result = {
            "stage": name,
            "device": device,
            "smoke": smoke,
            "deadline_s": deadline_s,
            "started": started,
            "seconds": round(time.perf_counter() - start, 1),
            "complete": complete,
            "ok": all(case["ok"] for case in cases),
            "cases_ok": sum(case["ok"] for case in cases),
            "cases": cases,
            "system": system,
            "sizes": dataclasses.asdict(sizes),
            "log": f"{name}.log",
        }
        write_json_atomically(path, result)
        return result

    with _stage_log(name, out / f"{name}.log") as log, tempfile.TemporaryDirectory(prefix=f"spacy-elmo-gpu-{name}-") as tmp:
        stage = Stage(name, torch.device(device), sizes, deadline_s, Path(tmp), log, echo)
        stage.on_record = lambda: write(complete=False)
        log.info("stage %s on %s (%s), deadline %.0f s", name, device, "smoke" if smoke else "full", deadline_s)
        RUNNERS[name](stage)
    result = write(complete=True)
    cases = stage.cases
    echo(f"{name}: {result['cases_ok']}/{len(cases)} cases ok in {result['seconds']:.0f} s; wrote {path}")
    return path


def run_stages(
    stage: str,
    out: Path,
    device: str = "cuda",
    smoke: bool = False,
    deadline_s: float = 420.0,
    echo: Callable[[str], None] = print,
) -> List[Path]:
    """``stage``, or every stage in turn for ``all`` (each with its own deadline)."""
    names = STAGES if stage == "all" else (stage,)
    if any(name not in RUNNERS for name in names):
        raise ValueError(f"--stage must be one of {', '.join(STAGE_CHOICES)}, got {stage!r}")
    if device not in ("cuda", "cpu"):
        raise ValueError(f"--device must be cuda or cpu, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device (--device cpu rehearses on the CPU)")
    return [run_stage(name, out, device, smoke, deadline_s, echo) for name in names]
