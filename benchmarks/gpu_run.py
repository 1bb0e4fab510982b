"""``python -m benchmarks gpu``: every GPU path of the package, in stages with deadlines.

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
``inference``, ``profile-step``, ``step-ab`` and pytest themselves; the pipe's speed and memory
on a GPU are ``python -m spacy_elmo bench --gpu-id 0`` and ``benchmarks pipe --doc-tokens N
--gpu-id 0``.

- ``pipe``: ``doc._.elmo`` a NumPy array on the CPU after ``spacy.require_gpu()``;
- ``train``: a tagger and an NER through the listener, ``spacy train`` on the project's configs
  and its demo corpora (a subprocess, ``--gpu-id 0`` on CUDA), a few hundred steps;
- ``one-rank``: ``torchrun --nproc-per-node 1`` (a process group, DDP) against one process, the
  bilm-tf recipe's pretraining steps;
- ``embed``: ``python -m spacy_elmo embed`` in one process and under torchrun (a rank per GPU; 2
  on the CPU) on real sentences, and whether both wrote the same vectors.

The train stage reads the checkout's ``project/``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from spacy_elmo.bench.system import system_info

from .subprocesses import CHECKOUT, descendants, package_argv, subprocess_env

STAGES = ("pipe", "train", "one-rank", "embed")
STAGE_CHOICES = (*STAGES, "all")
#: Characters of a subprocess's output kept in the stage log, and of an error in the JSON.
LOG_TAIL = 2_000_000
ERROR_TAIL = 3_000
#: Seconds a stopped subprocess gets to end its own workers (torchrun forwards SIGTERM).
GRACE_S = 15


@dataclass(frozen=True)
class Sizes:
    """How much each stage runs: ``FULL`` on the GPU, ``SMOKE`` to rehearse on 2 CPU cores."""

    train_steps: int
    train_eval_every: int
    train_dev_limit: int  # 0: the whole dev set
    tiny: bool  # the pretraining recipe with a tiny model (pretrain_bench.TINY)
    one_rank_steps: int
    embed_tokens: int
    embed_chunk: int


FULL = Sizes(
    train_steps=300,
    train_eval_every=100,
    train_dev_limit=0,
    tiny=False,
    one_rank_steps=60,
    embed_tokens=50_000,
    embed_chunk=500,
)
SMOKE = Sizes(
    train_steps=5,
    train_eval_every=5,
    train_dev_limit=10,
    tiny=True,
    one_rank_steps=4,
    embed_tokens=1_000,
    embed_chunk=20,
)


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


def _ranks(device: torch.device) -> int:
    """Processes of a torchrun case: one per GPU, 2 on the CPU (so that Gloo runs)."""
    return max(1, torch.cuda.device_count()) if device.type == "cuda" else 2


def _gpu_id(device: torch.device) -> str:
    return "0" if device.type == "cuda" else "-1"


def _checkout_path(*parts: str) -> Path:
    path = CHECKOUT.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: this stage runs from a source checkout of spacy_elmo")
    return path


# ----------------------------------------------------------------------------------------- pipe


def _spacy_on_device(device: torch.device) -> None:
    """spaCy's arrays (and so the elmo pipe's biLM) on the stage's device."""
    import spacy

    if device.type == "cuda":
        spacy.require_gpu()
    else:
        spacy.require_cpu()


def _register_spacy_parts() -> List[str]:
    """Import the modules that register the ``elmo`` factory and the architectures, so that a
    checkout that is not installed (no entry points) works too; returns their names."""
    import importlib

    names = ["spacy_elmo.architectures", "spacy_elmo.loaders", "spacy_elmo.pipe"]
    for name in names:
        importlib.import_module(name)
    return names


def _doc_output_on_cpu(stage: Stage) -> Dict[str, Any]:
    """Whatever the device, ``doc._.elmo`` is a NumPy array (CuPy arrays would break users'
    code and ``doc.to_bytes``)."""
    import numpy
    import spacy

    from spacy_elmo.bench.text import DEMO_TEXT, text_lines

    _register_spacy_parts()
    _spacy_on_device(stage.device)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo").initialize()
    doc = nlp(" ".join(text_lines(DEMO_TEXT)[:3]))
    bilm_device = next(nlp.get_pipe("elmo").bilm.parameters()).device
    arrays = {"doc._.elmo": doc._.elmo, "doc._.elmo_layers": doc._.elmo_layers, "doc[0].vector": doc[0].vector}
    types = {name: None if a is None else f"{type(a).__module__}.{type(a).__name__}" for name, a in arrays.items()}
    wrong = [name for name, a in arrays.items() if a is not None and not isinstance(a, numpy.ndarray)]
    out: Dict[str, Any] = {
        "tokens": len(doc),
        "sentences": len(list(doc.sents)),
        "types": types,
        "elmo_shape": list(doc._.elmo.shape),
        "bilm_device": str(bilm_device),
        "summary": f"doc._.elmo {types['doc._.elmo']} {tuple(doc._.elmo.shape)}, biLM on {bilm_device}",
    }
    errors = [f"{name} is {types[name]}, not a NumPy array" for name in wrong]
    if doc._.elmo.shape[0] != len(doc):
        errors.append(f"doc._.elmo has {doc._.elmo.shape[0]} rows for {len(doc)} tokens")
    if bilm_device.type != stage.device.type:
        errors.append(f"the biLM is on {bilm_device}, not {stage.device.type}")
    if errors:
        out.update(ok=False, error="; ".join(errors))
    return out


def pipe_stage(stage: Stage) -> None:
    try:
        stage.case("doc._.elmo on the CPU", _doc_output_on_cpu)
    finally:
        if "spacy" in sys.modules:
            import spacy

            spacy.require_cpu()  # the next stage starts as this one did


# ---------------------------------------------------------------------------------------- train

#: component -> (project config, demo corpus folder, what the folder holds, the score to show)
TRAINED = {
    "tagger": ("tagger_elmo.cfg", "ud-english-ewt", "UD English-EWT", "tag_acc"),
    "ner": ("ner_elmo.cfg", "wnut17", "WNUT17", "ents_f"),
}


def _demo_corpus(stage: Stage, component: str) -> Tuple[Path, Path]:
    """The project's demo slice as .spacy files, converted as its ``demo-convert`` step does
    (spaCy's converter, then the project's own scripts, run in this process)."""
    import runpy

    from spacy.cli.convert import convert

    source = _checkout_path("project", "demo_data", TRAINED[component][1])
    scripts = _checkout_path("project", "scripts")
    out = stage.workdir / "corpus" / component
    out.mkdir(parents=True, exist_ok=True)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # the scripts report to stdout: the log's
        if component == "tagger":
            convert(source, out, file_type="spacy", n_sents=1, converter="conllu")
            runpy.run_path(str(scripts / "upos_as_tags.py"))["main"](out)  # UPOS as the tagger's labels
        else:
            inputs = [source / "train.conll", source / "dev.conll"]
            runpy.run_path(str(scripts / "conll_ner_to_spacy.py"))["main"](out, inputs, n_sents=1)
    stage.log.info("%s", printed.getvalue())
    return out / "train.spacy", out / "dev.spacy"


def _train(stage: Stage, component: str) -> Dict[str, Any]:
    config_name, _, corpus_name, score = TRAINED[component]
    config = _checkout_path("project", "configs", config_name)
    train, dev = _demo_corpus(stage, component)
    code_file = stage.workdir / "register_spacy_elmo.py"
    code_file.write_text("".join(f"import {name}\n" for name in _register_spacy_parts()), encoding="utf-8")
    output = stage.workdir / f"train-{component}"
    s = stage.sizes
    argv = [
        sys.executable, "-m", "spacy", "train", config, "--output", output, "--code", code_file,
        "--gpu-id", _gpu_id(stage.device), "--paths.train", train, "--paths.dev", dev,
        "--training.max_steps", s.train_steps, "--training.max_epochs", 0,
        "--training.eval_frequency", s.train_eval_every, "--corpora.dev.limit", s.train_dev_limit,
        "--system.seed", 0,
    ]
    code, text, seconds = stage.run(argv, cwd=stage.workdir)
    if code != 0:
        raise RuntimeError(f"spacy train exited with {code}:\n{text[-ERROR_TAIL:]}")
    meta = json.loads((output / "model-last" / "meta.json").read_text(encoding="utf-8"))
    scores = meta.get("performance", {})
    return {
        "config": str(config.relative_to(CHECKOUT)),
        "corpus": f"{corpus_name} demo slice (project/demo_data)",
        "steps": s.train_steps,
        "wall_s": seconds,
        "scores": scores,
        "summary": f"{score} {scores.get(score, float('nan')):.3f} after {s.train_steps} steps in {seconds:.0f} s",
    }


def train_stage(stage: Stage) -> None:
    for component in TRAINED:
        stage.case(component, _train, component)


# ------------------------------------------------------------------------------------- one-rank


def _one_rank_against_one_process(stage: Stage, step: str) -> Dict[str, Any]:
    """``torchrun --nproc-per-node 1`` (a process group, DDP) against one process, the same
    steps of the bilm-tf recipe on windows, alternated A B A B: tokens/s of the last logged
    window of each run, and their ratio."""
    from spacy_elmo.bench.measure import alternating
    from spacy_elmo.bench.report import medians_and_ratios
    from spacy_elmo.bench.text import default_text_path
    from spacy_elmo.pretrain.config import config_text
    from spacy_elmo.pretrain.metrics import read_metrics

    from .pretrain_bench import TINY

    steps = stage.sizes.one_rank_steps
    tiny = TINY if stage.sizes.tiny else {}
    config = stage.workdir / "bilm-tf.cfg"
    config.write_text(config_text("bilm-tf", {"paths.train": str(default_text_path()), **tiny}), encoding="utf-8")
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


# ---------------------------------------------------------------------------------------- embed


def _embed_run(stage: Stage, torchrun: bool) -> Dict[str, Any]:
    """``python -m spacy_elmo embed`` on the bench text's sentences, in one process or under
    torchrun; tokens/s end to end and of the embedding alone (the command's summary line)."""
    from .embed_bench import embed_argv, summary_figures, write_input

    input_path = stage.workdir / "embed-input.txt"
    if not input_path.is_file():
        write_input(None, stage.sizes.embed_tokens, input_path)
    ranks = _ranks(stage.device) if torchrun else 1
    threads = 1  # a thread a process: what torchrun adds is ranks (a GPU or a core each)
    output = stage.workdir / f"embed-{'torchrun' if torchrun else 'one'}.hdf5"
    options = ["--chunk-size", str(stage.sizes.embed_chunk), "--gpu-id", _gpu_id(stage.device)]
    argv = embed_argv(ranks, input_path, output, options, threads, torchrun=torchrun)
    code, text, seconds = stage.run(argv, env=subprocess_env(threads), cwd=stage.workdir)
    if code != 0:
        raise RuntimeError(f"embed exited with {code}:\n{text[-ERROR_TAIL:]}")
    figures = summary_figures(text)
    return {
        "processes": ranks,
        "threads_per_process": threads,
        **figures,
        "wall_s": seconds,
        "tokens_per_s": figures["tokens"] / seconds,
        "summary": f"{figures['tokens']:,} tokens, {figures['tokens'] / seconds:,.0f} tok/s end to end ({ranks} x {threads} thread(s))",
    }


def _embed_outputs_equal(stage: Stage) -> Dict[str, Any]:
    """Both runs wrote the same datasets, the same sentence index and the same vectors."""
    import h5py
    import numpy

    paths = [stage.workdir / "embed-one.hdf5", stage.workdir / "embed-torchrun.hdf5"]
    with h5py.File(paths[0], "r") as one, h5py.File(paths[1], "r") as many:
        names = sorted(set(one) - {"sentence_to_index"})
        errors = []
        if sorted(set(many) - {"sentence_to_index"}) != names:
            errors.append("different dataset names")
        if "sentence_to_index" in one and one["sentence_to_index"][()].tolist() != many["sentence_to_index"][()].tolist():
            errors.append("different sentence_to_index")
        largest = 0.0
        for name in names:
            if name not in many:
                continue
            a, b = one[name][()], many[name][()]
            if a.shape != b.shape:
                errors.append(f"dataset {name}: shape {a.shape} against {b.shape}")
            elif a.size:
                largest = max(largest, float(numpy.abs(a - b).max()))
    out: Dict[str, Any] = {
        "datasets": len(names),
        "max_abs_diff": largest,
        "identical": largest == 0.0 and not errors,
        "summary": f"{len(names)} datasets, max |diff| {largest:.1e}",
    }
    if largest > 1e-5:
        errors.append(f"vectors differ by up to {largest:.2e} (> 1e-5)")
    if errors:
        out.update(ok=False, error="; ".join(errors))
    return out


def embed_stage(stage: Stage) -> None:
    stage.case("1 process embed", _embed_run, False)
    stage.case(f"torchrun --nproc-per-node {_ranks(stage.device)} embed", _embed_run, True)
    stage.case("outputs equal", _embed_outputs_equal)


RUNNERS: Dict[str, Callable[[Stage], None]] = {
    "pipe": pipe_stage,
    "train": train_stage,
    "one-rank": one_rank_stage,
    "embed": embed_stage,
}


# ------------------------------------------------------------------------------------- the run


def _jsonable(value: Any) -> Any:
    """NumPy scalars and arrays, paths and devices as JSON values (json's ``default``)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


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
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=1, default=_jsonable) + "\n", encoding="utf-8")
        tmp.replace(path)
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
