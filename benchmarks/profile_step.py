"""``python -m benchmarks profile-step``: where a pretraining step's device time and memory go,
kernel by kernel, grouped by what the kernel does.

One process builds the trainer of a ``benchmarks pretrain`` case (``pretrain_bench``), settles
it (a few steps: allocation, recording, compilation), then for each step kind asked for
(``--steps-kinds``, e.g. ``cuda_graph,eager``: the recorded step and its eager twin, one after
the other, the first freed before the second is built) profiles a few steps under
``torch.profiler`` (CPU activity, and CUDA's on a GPU) with shapes and FLOPs recorded. Each unit
of work (a CUDA kernel on a GPU, an operator's self time on the CPU) goes to one group:

- its *phase*: the trainer's ``record_function`` range it ran in (``pretrain.model.PHASES``);
  a backward operator takes the phase of the forward operator that made it (autograd's sequence
  numbers), so the backward splits by phase too; inside a recorded CUDA graph the kernels have
  no launching operator, and go by kernel name alone (``graph: ...``);
- its *kind*, from the operator's or kernel's name (``KIND_RULES``): products, convolutions,
  copies/casts, optimizer, reductions, element-wise;
- the groups: ``char CNN``, ``LSTM products`` (``LSTM projection`` where a forward product
  narrows its input, hidden to projection), ``LSTM element-wise``, ``softmax``, ``optimizer``,
  ``copies/casts``, ``batch``, ``other``.

Each group's device time per step, share of the step, FLOP/s (the profiler's count for products
and convolutions) and an estimate of bytes/s (each operator's inputs read and an output as large
as its largest input written, at the step's element size), against the card's peaks when given
(``--peak-tflops``, ``--peak-gbs``: docs/gpu_run.md lists the cards'). The top kernels are
listed too. ``--memory`` adds what holds the memory at the step's peak: parameters, gradients,
optimizer state, and the rest (activations and workspaces), with each group's allocations; on
CUDA a ``torch.cuda.memory`` snapshot (``memory_snapshot.pickle``, for
https://pytorch.org/memory_viz).

The results go to ``OUT/profile.json`` and ``OUT/profile.md``, rewritten after each part, so a
call cut short keeps what it measured. ``--smoke`` runs the tiny model on the CPU in seconds
(``tests/test_profile_step.py``).
"""

from __future__ import annotations

import json
import re
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from spacy_elmo.bench.system import system_info

from .pretrain_bench import bench_trainer, case_inputs, free_memory, named_case, profiled, settle

#: (kind, pattern on the lower-cased operator or kernel name), first match wins.
KIND_RULES: Tuple[Tuple[str, str], ...] = (
    ("optimizer", r"adagrad|adam|sgd|foreach|multi_tensor"),
    ("convolutions", r"conv|cudnn_convolution|implicit_gemm|wgrad|dgrad"),
    ("products", r"gemm|\bmm\b|aten::mm|addmm|bmm|matmul|linear|cutlass|xmma|nvjet|sm\d+_|ampere_|hopper_"
                 r"|cublas|_int_mm"),
    ("copies/casts", r"copy|memcpy|memset|_to_copy|\bcat\b|cat_|index|gather|scatter|fill|clone"
                     r"|contiguous|constant_pad|embedding|where|masked|expand|stack|unfold"),
    ("reductions", r"reduce|sum|softmax|norm|\bmax\b|amax|mean|logsumexp|nll|triton_red|triton_per"),
)
#: Phases whose kinds split into their own groups.
PHASE_GROUPS = {
    "char_cnn": "char CNN",
    "softmax": "softmax",
    "optimizer": "optimizer",
    "batch": "batch",
}
BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2}


def kind_of(name: str) -> str:
    lowered = name.lower()
    for kind, pattern in KIND_RULES:
        if re.search(pattern, lowered):
            return kind
    return "element-wise"


def group_of(phase: Optional[str], kind: str, projection: bool = False) -> str:
    """The group of a unit of work of ``kind`` run in ``phase`` (None: outside every range)."""
    if phase == "graph":
        return f"graph: {kind}"
    if kind == "copies/casts" and phase != "optimizer":
        return "copies/casts"
    if phase == "lstm":
        if kind == "products":
            return "LSTM projection" if projection else "LSTM products"
        return "LSTM element-wise"
    if phase in PHASE_GROUPS:
        return PHASE_GROUPS[phase]
    if kind == "optimizer":
        return "optimizer"
    return "other"


class _Ranges:
    """The trainer's phase ranges of a profile, to find the phase of a moment."""

    def __init__(self, events: Sequence[Any], labels: Dict[str, str]) -> None:
        by_label = {label: name for name, label in labels.items()}
        self.ranges = sorted(
            (e.time_range.start, e.time_range.end, by_label[e.name]) for e in events if e.name in by_label
        )

    def at(self, moment: float) -> Optional[str]:
        """The innermost (latest starting) range holding ``moment``."""
        found = None
        for start, end, phase in self.ranges:
            if start > moment:
                break
            if end >= moment:
                found = phase
        return found


def _is_projection(event: Any) -> bool:
    """A forward product that narrows its input by a factor of 4 or more (the LSTM's hidden to
    projection product: its inner dimension against its output's)."""
    shapes = [s for s in (getattr(event, "input_shapes", None) or []) if isinstance(s, list) and len(s) == 2]
    if len(shapes) < 2:
        return False
    inner, out = shapes[-2][1], shapes[-1][1]
    if event.name.endswith("mm") and len(shapes) == 3:  # addmm(bias, a, b)
        inner, out = shapes[1][1], shapes[2][1]
    return inner >= 4 * max(out, 1)


def _bytes_of(event: Any, element: int) -> float:
    """Inputs read and an output as large as the largest input written."""
    sizes = []
    for shape in getattr(event, "input_shapes", None) or []:
        if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
            n = 1
            for d in shape:
                n *= d
            sizes.append(n)
    return float(sum(sizes) + (max(sizes) if sizes else 0)) * element


def _owner_phase(event: Any, ranges: _Ranges, forward_phase: Dict[tuple, Optional[str]]) -> Tuple[Optional[str], bool]:
    """The phase of ``event`` and whether it ran in a backward: the phase of the forward
    operator of its autograd node, else the range it started in."""
    node = event
    while node is not None:
        if node.name.startswith("autograd::engine::evaluate_function") and node.sequence_nr >= 0:
            phase = forward_phase.get((node.sequence_nr, node.fwd_thread))
            if phase is not None:
                return phase, True
            break
        node = node.cpu_parent
    return ranges.at(event.time_range.start), False


def _is_range(event: Any) -> bool:
    """A ``record_function`` range (a user annotation, on the CPU or its device side), not an
    operator or a kernel."""
    return bool(event.is_user_annotation)


def _launching_op_ids(prof: Any) -> Callable[[Any], int]:
    """The id of the operator that launched a kernel: the event's own field from torch 2.13 on;
    before it (the lent machine had 2.11), the profiler's raw events, keyed by correlation id."""
    if hasattr(next(iter(prof.events()), None), "linked_correlation_id"):
        return lambda k: k.linked_correlation_id
    raw = prof.profiler.kineto_results.events()
    cuda = torch.autograd.DeviceType.CUDA
    linked = {e.correlation_id(): e.linked_correlation_id() for e in raw if e.device_type() == cuda}
    return lambda k: linked.get(k.id, 0)


def attribute(prof: Any, labels: Dict[str, str], device_type: str, element: int) -> List[Dict[str, Any]]:
    """Every unit of work of ``prof``: {name, op, phase, backward, kind, group, us, flops,
    bytes}: CUDA kernels and copies on a GPU (their launching operator's FLOPs and bytes shared
    among its kernels), operators' self CPU time on the CPU."""
    events = list(prof.events())
    ranges = _Ranges(events, labels)
    forward_phase: Dict[tuple, Optional[str]] = {}
    for e in events:
        if e.sequence_nr >= 0 and not e.name.startswith("autograd::") and (e.sequence_nr, e.thread) not in forward_phase:
            forward_phase[(e.sequence_nr, e.thread)] = ranges.at(e.time_range.start)
    units: List[Dict[str, Any]] = []
    if device_type == "cuda":
        # Each kernel links to the operator that launched it; a kernel of a replayed CUDA graph
        # links to none (the replay is one launch) and goes by its name alone.
        ops = {e.id: e for e in events if e.device_type == torch.autograd.DeviceType.CPU}
        launched: Dict[int, int] = defaultdict(int)
        # Every ``record_function`` range (the phases', the optimizer's own) also comes back as a
        # device event, the GPU's side of the range: it spans kernels, it is not work.
        device_events = [
            e for e in events if e.device_type == torch.autograd.DeviceType.CUDA and not _is_range(e)
        ]
        link = _launching_op_ids(prof)
        for k in device_events:
            launched[link(k)] += 1
        for k in device_events:
            op = ops.get(link(k))
            us = float(k.time_range.end - k.time_range.start)
            # A replay launches its kernels from no operator: they link to none, to the launch,
            # or (torch 2.11) to the range around it.
            if op is None or "graph" in op.name.lower() or _is_range(op):
                kind = kind_of(k.name)
                units.append({"name": k.name, "op": None, "phase": "graph", "backward": None, "kind": kind,
                              "group": group_of("graph", kind), "us": us, "flops": 0.0, "bytes": 0.0})  # fmt: skip
                continue
            phase, backward = _owner_phase(op, ranges, forward_phase)
            projection = not backward and phase == "lstm" and _is_projection(op)
            kind = kind_of(op.name) if kind_of(op.name) != "element-wise" else kind_of(k.name)
            share = launched[link(k)]
            units.append({
                "name": k.name, "op": op.name, "phase": phase, "backward": backward, "kind": kind,
                "group": group_of(phase, kind, projection), "us": us,
                "flops": float(getattr(op, "flops", 0) or 0) / share, "bytes": _bytes_of(op, element) / share,
            })  # fmt: skip
        return units
    for e in events:
        if e.name in labels.values() or e.device_type != torch.autograd.DeviceType.CPU:
            continue
        if e.self_cpu_time_total <= 0:
            continue
        phase, backward = _owner_phase(e, ranges, forward_phase)
        projection = not backward and phase == "lstm" and _is_projection(e)
        kind = kind_of(e.name)
        units.append({
            "name": e.name, "op": e.name, "phase": phase, "backward": backward, "kind": kind,
            "group": group_of(phase, kind, projection), "us": float(e.self_cpu_time_total),
            "flops": float(getattr(e, "flops", 0) or 0) if kind in ("products", "convolutions") else 0.0,
            "bytes": _bytes_of(e, element) if kind not in ("products", "convolutions") else 0.0,
        })  # fmt: skip
    return units


def summarize(units: Iterable[Dict[str, Any]], n_steps: int, step_ms: float,
              peak_tflops: Optional[float], peak_gbs: Optional[float]) -> Dict[str, Any]:  # fmt: skip
    """Per group: device (or CPU) ms per step, share, FLOP/s and bytes/s (and their fractions
    of the peaks when given); the top kernels by time."""
    units = list(units)
    groups: Dict[str, Dict[str, float]] = defaultdict(lambda: {"us": 0.0, "flops": 0.0, "bytes": 0.0, "count": 0})
    kernels: Dict[Tuple[str, str], Dict[str, float]] = defaultdict(lambda: {"us": 0.0, "count": 0})
    for u in units:
        g = groups[u["group"]]
        g["us"] += u["us"]
        g["flops"] += u["flops"]
        g["bytes"] += u["bytes"]
        g["count"] += 1
        k = kernels[(u["name"], u["group"])]
        k["us"] += u["us"]
        k["count"] += 1
    total_us = sum(g["us"] for g in groups.values()) or 1.0
    rows = []
    for name, g in sorted(groups.items(), key=lambda item: -item[1]["us"]):
        seconds = g["us"] / 1e6
        row: Dict[str, Any] = {
            "group": name,
            "ms_per_step": g["us"] / 1e3 / n_steps,
            "share": g["us"] / total_us,
            "units_per_step": g["count"] / n_steps,
            "gflop_per_step": g["flops"] / 1e9 / n_steps,
            "tflops": g["flops"] / seconds / 1e12 if seconds and g["flops"] else None,
            "gb_per_step": g["bytes"] / 1e9 / n_steps,
            "gbs": g["bytes"] / seconds / 1e9 if seconds and g["bytes"] else None,
        }
        if peak_tflops and row["tflops"] is not None:
            row["of_peak_flops"] = row["tflops"] / peak_tflops
        if peak_gbs and row["gbs"] is not None:
            row["of_peak_bytes"] = row["gbs"] / peak_gbs
        rows.append(row)
    top = sorted(kernels.items(), key=lambda item: -item[1]["us"])[:20]
    return {
        "work_ms_per_step": total_us / 1e3 / n_steps,
        "step_ms": step_ms,
        "groups": rows,
        "top_kernels": [
            {"name": name[:120], "group": group, "ms_per_step": k["us"] / 1e3 / n_steps, "calls_per_step": k["count"] / n_steps}
            for (name, group), k in top
        ],
    }


def profile_steps(trainer, batches, device: torch.device, n_steps: int, element: int,
                  peak_tflops: Optional[float], peak_gbs: Optional[float]) -> Dict[str, Any]:  # fmt: skip
    """``n_steps`` steps under the profiler, summarized (``summarize``)."""
    from spacy_elmo.pretrain.model import PHASES

    prof, step_ms = profiled(trainer, batches, device, n_steps, record_shapes=True, with_flops=True)
    return summarize(attribute(prof, PHASES, device.type, element), n_steps, step_ms, peak_tflops, peak_gbs)


def _tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    seen, total = set(), 0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.layout != torch.strided:  # sparse rows (Adagrad's)
            total += _tensor_bytes([t.coalesce().values(), t.coalesce().indices()])
        elif isinstance(t, torch.Tensor) and t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def memory_profile(trainer, batches, device: torch.device, out: Path) -> Dict[str, Any]:
    """What holds the memory over one step: parameters, gradients, optimizer state, the step's
    peak and the rest; the bytes each group allocates (the profiler's memory events); on CUDA a
    memory snapshot in ``out``."""
    from spacy_elmo.bench.measure import MB, PeakMemory
    from spacy_elmo.pretrain.model import PHASES

    cuda = device.type == "cuda"  # run_profile records the memory's history since the trainer's start
    with PeakMemory(device) as peak:
        prof, _ = profiled(trainer, batches, device, 1, profile_memory=True, record_shapes=True)
    result: Dict[str, Any] = {"peak_mb": peak.mb, "peak_total_mb": peak.total / MB, "peak_method": peak.method}
    if cuda:
        snapshot = out / "memory_snapshot.pickle"
        torch.cuda.memory._dump_snapshot(str(snapshot))
        result["snapshot"] = snapshot.name
        result["reserved_mb"] = torch.cuda.memory_reserved(device) / MB
    params = list(trainer.model.parameters())
    state = [v for s in trainer.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    held = {
        "parameters_mb": _tensor_bytes(params) / MB,
        "gradients_mb": _tensor_bytes(p.grad for p in params if p.grad is not None) / MB,
        "optimizer_state_mb": _tensor_bytes(state) / MB,
    }
    held["rest_at_peak_mb"] = max(0.0, peak.mb - sum(held.values())) if peak.mb else None
    result["held"] = held
    ranges = _Ranges(list(prof.events()), PHASES)
    allocated: Dict[str, float] = defaultdict(float)
    for e in prof.events():
        usage = e.self_device_memory_usage if cuda else e.self_cpu_memory_usage
        if usage and usage > 0 and e.name not in PHASES.values():
            allocated[ranges.at(e.time_range.start) or "other"] += usage
    result["allocated_mb_by_phase"] = {k: v / MB for k, v in sorted(allocated.items(), key=lambda kv: -kv[1])}
    return result


def markdown(result: Dict[str, Any]) -> str:
    """The profile as Markdown tables: per step kind, the groups and the top kernels."""
    lines = [f"# Step profile: {result['case']} {result['rows']} x {result['window']}, {result['precision']}, "
             f"{result['device']}", ""]  # fmt: skip
    for kind, part in result.get("kinds", {}).items():
        if "error" in part:
            lines += [f"## {kind}: error", "", "```", part["error"][-1500:], "```", ""]
            continue
        if "groups" not in part:
            continue
        lines += [f"## {kind}: {part['step_ms']:.1f} ms a step, {part['work_ms_per_step']:.1f} ms of "
                  f"{'device' if result['device'] == 'cuda' else 'CPU'} work", ""]  # fmt: skip
        lines += ["| group | ms/step | share | GFLOP/step | TFLOP/s | of peak | GB/step | GB/s | of peak |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip

        def cell(value: Optional[float], fmt: str) -> str:
            return "" if value is None else format(value, fmt)

        for g in part["groups"]:
            lines.append(
                f"| {g['group']} | {g['ms_per_step']:.2f} | {g['share']:.1%} | {cell(g['gflop_per_step'] or None, '.2f')} "
                f"| {cell(g['tflops'], '.2f')} | {cell(g.get('of_peak_flops'), '.1%')} | {cell(g['gb_per_step'] or None, '.3f')} "
                f"| {cell(g['gbs'], '.1f')} | {cell(g.get('of_peak_bytes'), '.1%')} |"
            )
        lines += ["", "| kernel | group | ms/step | calls/step |", "| --- | --- | ---: | ---: |"]
        for k in part["top_kernels"]:
            name = k["name"].replace("|", "/")
            lines.append(f"| `{name}` | {k['group']} | {k['ms_per_step']:.3f} | {k['calls_per_step']:.0f} |")
        lines.append("")
        if "memory" in part and "error" in part["memory"]:
            lines += ["Memory: error", "", "```", part["memory"]["error"][-1500:], "```", ""]
        elif "memory" in part:
            m = part["memory"]
            lines += [f"Memory: peak {m['peak_mb']:.0f} MB ({m['peak_method']}); held: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in m["held"].items() if v is not None)
                      + "; allocated in the step by phase (MB): "
                      + ", ".join(f"{k} {v:.1f}" for k, v in m["allocated_mb_by_phase"].items()), ""]  # fmt: skip
    return "\n".join(lines) + "\n"


def run_profile(
    out: Path,
    case: str = "bilm-tf",
    rows: int = 128,
    window: int = 20,
    precision: str = "bf16",
    step_kinds: Sequence[str] = ("cuda_graph", "eager"),
    device_name: str = "cuda",
    warmup: int = 10,
    steps: int = 5,
    memory: bool = False,
    smoke: bool = False,
    overrides: Optional[Dict[str, Any]] = None,
    peak_tflops: Optional[float] = None,
    peak_gbs: Optional[float] = None,
    text: Optional[str] = None,
    threads: Optional[int] = None,
) -> Dict[str, Any]:
    """Profile the case's step of each of ``step_kinds`` (see the module docstring); writes
    ``out/profile.json`` and ``out/profile.md`` after each part and returns the result."""
    device = torch.device(device_name)
    threads = threads or torch.get_num_threads()
    out.mkdir(parents=True, exist_ok=True)
    the_case = named_case(case, smoke, overrides)
    result: Dict[str, Any] = {
        "case": the_case.name, "rows": rows, "window": window, "precision": precision, "device": device.type,
        "smoke": smoke, "overrides": overrides or {}, "peak_tflops": peak_tflops, "peak_gbs": peak_gbs,
        "system": system_info(), "kinds": {}, "complete": False,
    }  # fmt: skip

    def write() -> None:
        (out / "profile.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
        (out / "profile.md").write_text(markdown(result), encoding="utf-8")

    write()
    element = BYTES_PER_ELEMENT.get(precision, 4)
    with case_inputs(the_case, text) as (text_path, vocab, scratch):
        for kind in step_kinds:
            part: Dict[str, Any] = {}
            result["kinds"][kind] = part
            trainer = None
            recording = memory and device.type == "cuda"
            if recording:  # from the start: a recording that runs out of memory is seen too
                torch.cuda.memory._record_memory_history(max_entries=20_000)
                part["timed_with_memory_history"] = True  # slower: not for comparing speeds
            try:
                started = time.perf_counter()
                trainer = bench_trainer(the_case, text_path, vocab, scratch / kind, rows, window, precision, kind, device, threads)
                batches = trainer.batches()
                part["step"] = trainer.step_kind
                part["warmup_step_s"] = [round(t, 4) for t in settle(trainer, batches, device, warmup)]
                part["setup_s"] = time.perf_counter() - started
                write()
                part.update(profile_steps(trainer, batches, device, steps, element, peak_tflops, peak_gbs))
                write()
                if memory:
                    try:
                        part["memory"] = memory_profile(trainer, batches, device, out)
                    except Exception:  # the time profile above stays
                        part["memory"] = {"error": traceback.format_exc()[-3000:]}
                    write()
            except Exception:  # recorded; the next kind runs
                part["error"] = traceback.format_exc()[-3000:]
                if recording:  # what held the memory when it failed
                    try:
                        torch.cuda.memory._dump_snapshot(str(out / f"memory_snapshot_{kind}_failed.pickle"))
                        part["failed_snapshot"] = f"memory_snapshot_{kind}_failed.pickle"
                    except Exception:
                        part["failed_snapshot"] = traceback.format_exc()[-1000:]
                write()
            finally:
                if recording:
                    torch.cuda.memory._record_memory_history(enabled=None)
                del trainer
                free_memory(device)
    result["complete"] = True
    write()
    return result
