"""``benchmarks pretrain``: pretraining throughput in steady state.

Each case is the package's own training step (``Trainer.train_step`` on ``Trainer.batches``, the
trainer's batches of the text), timed after the step time has settled:

- warm-up: ``warmup`` steps (10 by default), and from ten on more, until the median of the last
  five step times is within 5% of the five before (at most four times ``warmup``): the first
  steps allocate, record CUDA graphs or compile;
- timed: at least ``steps`` steps and ``seconds`` seconds, one clock around all of them (the
  host builds each batch in the loop, as in training).

Where a step's time goes, phase by phase and kernel by kernel, is ``benchmarks profile-step``'s.

Cases (``CASES``), all on windows of running text (bilm-tf's batches: rows of ``window`` tokens)
except the bundled recipe, which batches sentences as the project trains it:

- ``bilm-tf``: ``init-config --recipe bilm-tf`` (the released original shape, clip 3, 8,192
  negatives, Adagrad) with a 793,471-word vocabulary (the text's words by frequency, then
  synthetic words up to that size: only the size matters for speed);
- ``fast``: ``--recipe fast``, the same without clipping (cuDNN's fused LSTM on a GPU);
- ``bundled``: the bundled model's recipe as it is (the project's pretraining config, shipped
  in the model's directory), its vocabulary size; ``bundled-full``: with the full softmax.

``rows`` may be ``"max"``: the largest number of rows whose steps fit in the GPU's memory,
doubled from the case's first size until a step runs out of memory.
"""

from __future__ import annotations

import contextlib
import gc
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from tqdm import tqdm

from spacy_elmo.bench.isolate import run_isolated
from spacy_elmo.bench.measure import MB, PeakMemory
from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import DEFAULT_TEXT, text_lines
from spacy_elmo.nn.precision import TRAINING_PRECISIONS, runs_on

from .shapes import bundled_recipe_path
from .text import words_by_frequency
from .timing import Stopwatch, synchronize

ORIGINAL_VOCAB_SIZE = 793_471
STEP_KINDS = ("eager", "cuda_graph", "compile", "compile_graph")
#: The most rows ``rows = "max"`` tries (its probes start at 128 and double).
MAX_ROWS_LIMIT = 2**16


@dataclass
class PretrainCase:
    """A pretraining config (a file, or the package default with an ``init-config`` recipe)
    with overrides, and the size of the synthesized vocabulary. ``windows``: batches of rows x
    window (the bench's ``rows``), else the config's own sentence batches."""

    name: str
    vocab_size: int
    config_path: Optional[Path] = None
    recipe: str = "default"
    overrides: Dict[str, Any] = field(default_factory=dict)
    windows: bool = True
    description: str = ""


def bilm_tf_case() -> PretrainCase:
    return PretrainCase(
        "bilm-tf", ORIGINAL_VOCAB_SIZE, recipe="bilm-tf",
        description="init-config --recipe bilm-tf: original shape, clip 3, windows, 8,192 negatives, Adagrad",
    )  # fmt: skip


def fast_case() -> PretrainCase:
    return PretrainCase(
        "fast", ORIGINAL_VOCAB_SIZE, recipe="fast",
        description="init-config --recipe fast: bilm-tf without clipping (torch's fused LSTM)",
    )  # fmt: skip


def bundled_case() -> PretrainCase:
    """The bundled model's recipe (FileNotFoundError if an installation lacks it: never another
    config in its place)."""
    from confection import Config

    path = bundled_recipe_path()
    config = Config().from_disk(path, interpolate=False)
    return PretrainCase(
        name="bundled",
        vocab_size=int(config["vocab"]["size"]),
        config_path=path,
        windows=config["corpus"].get("batching", "sentences") == "windows",
        description=f"the bundled model's recipe ({path}), its own batches",
    )


def bundled_full_case() -> PretrainCase:
    """The bundled case with the full softmax: what its sampled softmax saves per token."""
    case = bundled_case()
    case.name = "bundled-full"
    case.overrides["objective.softmax"] = "full"
    case.description = "the bundled case with a full softmax over the whole vocabulary"
    return case


CASES: Dict[str, Callable[[], PretrainCase]] = {
    "bilm-tf": bilm_tf_case,
    "fast": fast_case,
    "bundled": bundled_case,
    "bundled-full": bundled_full_case,
}


#: A tiny model on top of any recipe, for rehearsals and tests (as tests/test_pretrain.py).
TINY = {
    "model.filters": [[1, 8], [2, 8], [3, 16]],
    "model.char_embedding_dim": 4,
    "model.n_highway": 1,
    "model.lstm_dim": 32,
    "model.projection_dim": 16,
    "vocab.size": 500,
    "vocab.min_count": 1,
    "corpus.max_sequence_length": 30,
    "corpus.shuffle_buffer": 200,
    "training.batch_tokens": 400,
}


def tiny(case: PretrainCase) -> PretrainCase:
    """``case`` with a tiny model, a 500-word vocabulary and 50 negatives (its recipe's clipping
    and optimizer kept): what ``--tiny`` rehearses."""
    overrides = {**case.overrides, **TINY, "objective.n_negative_samples": 50}
    if case.windows:
        del overrides["training.batch_tokens"]  # the bench's rows x window
    return PretrainCase(case.name, 500, case.config_path, case.recipe, overrides, case.windows,
                        f"{case.description} (tiny model)")  # fmt: skip


def named_case(name: str, tiny_model: bool = False, overrides: Optional[Dict[str, Any]] = None) -> PretrainCase:
    """The case ``name`` (``CASES``), with a tiny model (``tiny``) and config ``overrides``;
    ValueError naming the cases for another name."""
    if name not in CASES:
        raise ValueError(f"--case must be one of {', '.join(CASES)}, got {name!r}")
    case = tiny(CASES[name]()) if tiny_model else CASES[name]()
    return replace(case, overrides={**case.overrides, **(overrides or {})})


@contextlib.contextmanager
def case_inputs(case: PretrainCase, text: Optional[str]) -> Iterator[Tuple[Path, Path, Path]]:
    """``(text, vocabulary, scratch folder)`` of a case's trainers: the text (default: the
    benches' own), the case's vocabulary written from it, and a folder removed afterwards."""
    text_path = Path(text) if text else DEFAULT_TEXT
    scratch = Path(tempfile.mkdtemp(prefix=f"bench-pretrain-{case.name}-"))
    try:
        vocab = write_vocab(scratch / "vocab.txt", words_by_frequency(text_lines(text_path)), case.vocab_size)
        yield text_path, vocab, scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def free_memory(device: torch.device) -> None:
    """After a trainer is dropped: its memory back, and the GPU's peak counter reset."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def write_vocab(path: Path, words: Sequence[str], size: int) -> Path:
    """bilm-tf's vocab layout (``<S>``, ``</S>``, ``<UNK>``, words by frequency), padded with
    synthetic words to exactly ``size`` entries."""
    specials = ["<S>", "</S>", "<UNK>"]
    real = [w for w in words if w not in specials][: size - len(specials)]
    synthetic = [f"<synthetic_{i}>" for i in range(size - len(specials) - len(real))]
    path.write_text("\n".join(specials + real + synthetic) + "\n", encoding="utf-8")
    return path


def bench_trainer(case: PretrainCase, text: Path, vocab: Path, out: Path, rows: int, window: int,
                  precision: str, step: str, device: torch.device, threads: int):  # fmt: skip
    """A ``Trainer`` of ``case`` on ``text`` for a bench: its batches of ``rows`` windows (or
    sentences), run step by step by the caller (this bench, ``step_ab``, ``profile_step``)."""
    from spacy_elmo.pretrain.config import RECIPES, load_config, parse_settings
    from spacy_elmo.pretrain.trainer import Trainer

    # "fp32" exact (cuDNN allows TF32 by default); the trainer turns TF32 on for "tf32"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    overrides = {
        **RECIPES[case.recipe],
        **case.overrides,
        "paths.train": str(text),
        "paths.dev": None,
        "paths.vocab": str(vocab),
        "corpus.tokenized": True,
        "training.precision": precision,
        "training.step": step,
        "training.max_steps": 10**9,
        "training.log_every": 10**9,
        "system.threads": threads,  # the trainer sets torch's thread count from it
    }
    if case.windows:
        overrides.update({
            "corpus.batching": "windows",
            "corpus.window_length": window,
            "training.batch_tokens": rows * window,
        })  # fmt: skip
    settings = parse_settings(load_config(case.config_path, overrides))
    gpu_id = device.index or 0 if device.type == "cuda" else -1
    return Trainer(settings, out, gpu_id=gpu_id, show_progress=False)


def _step(trainer, batches: Iterator) -> int:
    """One training step on the trainer's next batch; returns its predictions per direction."""
    from spacy_elmo.pretrain.model import PHASES

    with torch.profiler.record_function(PHASES["batch"]):
        batch = next(batches)
    trainer.train_step(batch)
    trainer.step += 1
    return batch.n_targets


def settle(trainer, batches: Iterator, device: torch.device, warmup: int) -> List[float]:
    """``warmup`` steps, and from ten on, more until the median of the last five step times is
    within 5% of the five before (at most ``4 * warmup``); returns their times (s)."""
    times: List[float] = []
    wanted, limit = max(warmup, 1), 4 * max(warmup, 1)
    while len(times) < wanted:
        with Stopwatch(device) as clock:
            _step(trainer, batches)
        times.append(clock.seconds)
        if len(times) >= max(warmup, 10) and len(times) < limit:
            last, before = statistics.median(times[-5:]), statistics.median(times[-10:-5])
            if abs(last - before) > 0.05 * before:
                wanted = len(times) + 1
    return times


def timed(trainer, batches: Iterator, device: torch.device, steps: int, seconds: float = 0.0) -> Dict[str, Any]:
    """At least ``steps`` steps and ``seconds`` seconds under one clock (the host builds each
    batch in the loop, as in training): steps, seconds, seconds a step and tokens/s."""
    n_steps, n_targets = 0, 0
    with Stopwatch(device) as clock:
        start = time.perf_counter()
        while n_steps < steps or time.perf_counter() - start < seconds:
            n_targets += _step(trainer, batches)
            n_steps += 1
    return {"timed_steps": n_steps, "timed_s": clock.seconds, "step_s": clock.seconds / n_steps,
            "tokens_per_s": n_targets / clock.seconds}  # fmt: skip


def profiled(trainer, batches: Iterator, device: torch.device, n_steps: int, **options: Any) -> Tuple[Any, float]:
    """``n_steps`` steps under ``torch.profiler`` (CPU activity, and CUDA's on a GPU; ``options``
    the profiler's own): the profile and the milliseconds a step."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, **options) as prof, Stopwatch(device) as clock:
        for _ in range(n_steps):
            _step(trainer, batches)
    return prof, clock.seconds * 1e3 / n_steps


def measure_training(
    case: PretrainCase,
    text: Optional[str],
    rows: int,
    window: int,
    warmup: int,
    steps: int,
    seconds: float,
    precision: str,
    step: str,
    device_name: str,
    threads: int,
) -> Dict[str, Any]:
    """One case in steady state (meant to run in a fresh process)."""
    device = torch.device(device_name)
    with case_inputs(case, text) as (text_path, vocab, scratch):
        trainer = bench_trainer(case, text_path, vocab, scratch / "run", rows, window, precision, step, device, threads)
        batches = trainer.batches()
        with PeakMemory(device) as peak:
            warmup_times = settle(trainer, batches, device, warmup)
            steady = timed(trainer, batches, device, steps, seconds)
        row: Dict[str, Any] = {
            "case": case.name,
            "description": case.description,
            "rows": rows if case.windows else None,
            "window": window if case.windows else None,
            "batch_tokens": trainer.settings.training.batch_tokens,
            "batching": trainer.settings.corpus.batching,
            "precision": precision,
            "step": trainer.step_kind,
            "vocab_size": len(trainer.vocab),
            "softmax": "sampled" if trainer.use_sampled else "full",
            "softmax_updates": "sparse rows" if trainer.sparse_updates else "dense",
            "n_negative_samples": trainer.settings.objective.n_negative_samples,
            "optimizer": trainer.settings.optimizer.name,
            "clipped": trainer.settings.options.lstm.cell_clip is not None,
            "bilm_parameters": sum(p.numel() for p in trainer.model.bilm.parameters()),
            "softmax_parameters": sum(p.numel() for p in trainer.model.softmax.parameters()),
            "threads": torch.get_num_threads(),
            "warmup_steps": len(warmup_times),
            "warmup_step_s": [round(t, 4) for t in warmup_times],
            **steady,
            "peak_mb": peak.mb,
            "peak_total_mb": peak.total / MB,
            "peak_method": peak.method,
        }
        return row


def largest_rows(
    case: PretrainCase, text: Optional[str], window: int, precision: str, step: str,
    device_name: str, threads: int, start: int = 128,
) -> Dict[str, Any]:  # fmt: skip
    """The most rows (``start`` doubled) whose training steps run in the GPU's memory: three
    steps at each size until one runs out of memory (meant to run in a fresh process)."""
    device = torch.device(device_name)
    if device.type != "cuda":
        raise ValueError('rows "max" probes a GPU\'s memory: use --device cuda, or a number of rows')
    fits, rows, tried = None, start, []
    with case_inputs(case, text) as (text_path, vocab, scratch):
        while rows <= MAX_ROWS_LIMIT:
            trainer = None
            try:
                trainer = bench_trainer(case, text_path, vocab, scratch / f"run{rows}", rows, window, precision, step, device, threads)
                batches = trainer.batches()
                for _ in range(3):
                    _step(trainer, batches)
                synchronize(device)
                tried.append({"rows": rows, "fits": True, "peak_total_mb": torch.cuda.max_memory_allocated(device) / MB})
                fits, rows = rows, 2 * rows
            except torch.cuda.OutOfMemoryError:
                tried.append({"rows": rows, "fits": False})
                break
            finally:
                del trainer
                free_memory(device)
    if fits is None:
        raise RuntimeError(f"{case.name}: not even {start} rows fit on {device}")
    return {"rows": fits, "tried": tried}


def run_pretrain_bench(
    cases: Sequence[PretrainCase],
    text: Optional[Path] = None,
    rows: Sequence[Union[int, str]] = (128,),
    window: int = 20,
    warmup: int = 10,
    steps: int = 50,
    seconds: float = 30.0,
    precisions: Sequence[str] = ("fp32",),
    step_kinds: Sequence[str] = ("eager",),
    device: str = "auto",
    threads: Optional[int] = None,
    isolate: bool = True,
    progress: bool = True,
    on_row: Optional[Callable[[Dict[str, Any]], None]] = None,
) -> Dict[str, Any]:
    """Every case x rows x precision x step kind, each in a fresh process (``isolate``);
    ``on_row(result so far)`` after each, so that a cut run keeps what it measured."""
    for precision in precisions:
        if precision not in TRAINING_PRECISIONS:
            raise ValueError(f"--precision must be one of {TRAINING_PRECISIONS}, got {precision!r}")
    for kind in step_kinds:
        if kind not in STEP_KINDS:
            raise ValueError(f"--step must be one of {STEP_KINDS}, got {kind!r}")
    if window < 2:
        raise ValueError(f"--window must be at least 2 tokens, got {window}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device")
    threads = threads or torch.get_num_threads()
    result: Dict[str, Any] = {
        "benchmark": "pretrain",
        "system": system_info(),
        "settings": {
            "rows": list(rows), "window": window, "warmup_steps": warmup, "timed_steps": steps,
            "timed_seconds": seconds, "precisions": list(precisions), "steps": list(step_kinds),
            "device": device, "threads": threads, "isolated_processes": isolate,
            "text": str(text or DEFAULT_TEXT),
            "cases": {c.name: {"config": str(c.config_path or "default"), "recipe": c.recipe,
                               "overrides": c.overrides, "windows": c.windows} for c in cases},
        },  # fmt: skip
        "rows": [],
    }
    if "max" in rows and not all(c.windows for c in cases):
        raise ValueError('rows "max" sizes windows of running text: the sentence cases make their own batches')
    plan = [(c, r, p, k) for c in cases for r in (rows if c.windows else rows[:1]) for p in precisions for k in step_kinds]
    for case, size, precision, kind in tqdm(plan, desc="pretrain", unit="case", disable=not progress):
        # "tf32" is fp32 in a process with TF32 on (the trainer's training_precision)
        if not runs_on("fp32" if precision == "tf32" else precision, torch.device(device)):
            row = {"case": case.name, "precision": precision, "step": kind, "skipped": f"{precision} does not run on {device}"}
        else:
            row = _measure_case(case, text, size, window, warmup, steps, seconds, precision, kind,
                                device, threads, isolate)  # fmt: skip
        result["rows"].append(row)
        if on_row is not None:
            on_row(result)
    return result


def _measure_case(case, text, size, window, warmup, steps, seconds, precision, kind, device, threads, isolate):  # fmt: skip
    """One row: measured, or the error that stopped it (the other cases go on)."""
    text_arg = str(text) if text else None
    probe: Dict[str, Any] = {}
    try:
        if size == "max":
            probe = run_isolated(largest_rows, case, text_arg, window, precision, kind, device, threads, isolate=isolate)
            size = probe["rows"]
        row = run_isolated(
            measure_training, case, text_arg, int(size), window, warmup, steps, seconds,
            precision, kind, device, threads, isolate=isolate,
        )  # fmt: skip
    except Exception as err:  # recorded: a case that cannot run (memory, a kernel) is a finding
        row = {"case": case.name, "rows": size, "precision": precision, "step": kind, "error": f"{type(err).__name__}: {err}"}
    if probe:
        row["largest_rows_probe"] = probe["tried"]
    return row


PRETRAIN_COLUMNS = [
    ("case", "case", ""),
    ("rows", "rows", ""),
    ("precision", "precision", ""),
    ("step", "step", ""),
    ("softmax_updates", "updates", ""),
    ("timed_steps", "steps", ""),
    ("step_s", "s/step", ".3f"),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("peak_mb", "peak MB (steps)", ",.0f"),
    ("peak_total_mb", "peak MB (total)", ",.0f"),
]
