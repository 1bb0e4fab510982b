"""``python -m benchmarks step-ab``: pretraining step variants against each other in one process.

Each variant is a ``benchmarks pretrain`` case (``pretrain_bench``) with config overrides (the
step kind and the LSTM's settings: ``[training] step``, ``fused_cell``, ``directions_on_streams``,
``lstm_wavefront``). With ``together`` every variant's trainer is built first, each settled
(warm-up until its step time settles: recording, compilation), then ``rounds`` rounds time
``steps`` steps of each variant, the order alternating from round to round, so that the
machine's drift falls on all alike; tokens/s per round, the medians, and each variant's ratio
to the first. Without ``together`` (batches too large for two trainers at once) each variant is
built, settled, timed over all its rounds and freed before the next. The result is written to
``output`` after every round.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import torch

from spacy_elmo.bench.measure import MB, alternating
from spacy_elmo.bench.report import write_json
from spacy_elmo.bench.system import system_info

from .pretrain_bench import PretrainCase, bench_trainer, case_inputs, free_memory, named_case, settle, timed
from .timing import medians_and_ratios


def parse_variant(spec: str) -> Tuple[str, Dict[str, Any]]:
    """``"name:key=value,key=value"`` -> (name, {"training.key": value}); keys without a section
    are ``[training]``'s; values are JSON where they parse (true, 3), else strings."""
    name, _, settings = spec.partition(":")
    if not name or not settings:
        raise ValueError(f"variant {spec!r}: expected NAME:key=value[,key=value]")
    overrides: Dict[str, Any] = {}
    for item in settings.split(","):
        key, has_value, value = item.partition("=")
        if not has_value or not key:
            raise ValueError(f"variant {spec!r}: {item!r} is not key=value")
        key = key.strip() if "." in key else f"training.{key.strip()}"
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value.strip()
    return name, overrides


def run_step_ab(
    variants: Sequence[str],
    case: str = "bilm-tf",
    rows: int = 128,
    window: int = 20,
    precision: str = "bf16",
    device_name: str = "cuda",
    warmup: int = 10,
    steps: int = 20,
    rounds: int = 3,
    together: bool = True,
    smoke: bool = False,
    output: Optional[Path] = None,
    text: Optional[str] = None,
    threads: Optional[int] = None,
) -> Dict[str, Any]:
    """See the module docstring; returns the result written to ``output``."""
    run = _StepAB(
        [parse_variant(v) for v in variants], named_case(case, smoke), rows, window, precision,
        torch.device(device_name), threads or torch.get_num_threads(), output,
    )  # fmt: skip
    run.result.update(smoke=smoke, together=together, rounds=rounds, steps_per_round=steps)
    with case_inputs(run.base, text) as run.inputs:
        if together:
            run.time_together(warmup, steps, rounds)
        else:
            run.time_one_after_another(warmup, steps, rounds)
    run.result["complete"] = True
    run.write()
    return run.result


class _StepAB:
    """One comparison: its variants' trainers, their timed rounds, and the JSON written as it goes."""

    def __init__(self, parsed, base: PretrainCase, rows, window, precision, device, threads, output) -> None:
        self.parsed, self.base, self.output = parsed, base, output
        self.shape = (rows, window, precision)
        self.device, self.threads = device, threads
        self.inputs: Tuple[Path, Any, Path] = None
        self.result: Dict[str, Any] = {
            "case": base.name, "rows": rows, "window": window, "precision": precision, "device": device.type,
            "system": system_info(), "variants": {name: {"overrides": o, "rounds": []} for name, o in parsed},
            "complete": False,
        }  # fmt: skip

    def write(self) -> None:
        """Medians and ratios to the first variant, then the JSON (every round, so a cut run keeps them)."""
        variants = self.result["variants"]
        rates = {name: [r["tokens_per_s"] for r in v["rounds"]] for name, v in variants.items()}
        medians, ratios = medians_and_ratios(rates, self.parsed[0][0])
        for name, v in variants.items():
            v.update(median_tokens_per_s=medians[name], ratio_to_first=ratios[name])
        write_json(self.result, self.output, quiet=True)

    def build(self, name: str, overrides: Dict[str, Any], warmup: int):
        """The variant's trainer and batches, settled (recorded or compiled, warmed up)."""
        base, (text_path, vocab, scratch), (rows, window, precision) = self.base, self.inputs, self.shape
        variant = replace(base, overrides={**base.overrides, **overrides})
        step = overrides.get("training.step", "eager")
        trainer = bench_trainer(
            variant, text_path, vocab, scratch / name, rows, window, precision, step, self.device, self.threads
        )
        batches = trainer.batches()
        record = self.result["variants"][name]
        record["step"] = trainer.step_kind
        record["warmup_step_s"] = [round(t, 4) for t in settle(trainer, batches, self.device, warmup)]
        if self.device.type == "cuda":
            record["peak_mb"] = torch.cuda.max_memory_allocated(self.device) / MB
        self.write()
        return trainer, batches

    def failed(self, name: str) -> None:
        self.result["variants"][name]["error"] = traceback.format_exc()[-3000:]
        self.write()

    def time_together(self, warmup: int, steps: int, rounds: int) -> None:
        """Every variant built first, then rounds in alternating order."""
        built: Dict[str, Any] = {}
        for name, overrides in self.parsed:
            try:
                built[name] = self.build(name, overrides, warmup)
            except Exception:  # recorded; the others run
                self.failed(name)
        def one(name: str, _: int) -> None:
            self.result["variants"][name]["rounds"].append(timed(*built[name], self.device, steps))
            self.write()

        alternating(list(built), rounds, one)

    def time_one_after_another(self, warmup: int, steps: int, rounds: int) -> None:
        """Each variant built, timed over all its rounds and freed before the next."""
        for name, overrides in self.parsed:
            trainer = None
            try:
                trainer, batches = self.build(name, overrides, warmup)
                for _ in range(rounds):
                    self.result["variants"][name]["rounds"].append(timed(trainer, batches, self.device, steps))
                    self.write()
            except Exception:
                self.failed(name)
            finally:
                del trainer
                free_memory(self.device)
