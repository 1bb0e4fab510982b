"""``benchmarks pretrain``: training throughput of the pretraining model, shape against shape.

Cases, each timed in a fresh process with the package's own training step (the ``Trainer``'s
forward, loss, backward, gradient clipping and optimizer step):

- ``original``: the released "original" shape as bilm-tf trained it: a 793,471-word vocabulary
  (the text's words by frequency, then synthetic words up to that size: only the size matters
  for speed), sampled softmax with 8,192 negatives, Adagrad (lr 0.2), clip 10, dropout 0.1;
- ``bundled``: the bundled model's pretraining config, as it is (its ``[model]``,
  ``[objective]``, ``[optimizer]``), with a vocabulary of its ``[vocab] size``: the recipe shipped
  in the bundled model's directory (``shapes.BUNDLED_RECIPE_NAME``), the same in a checkout and
  an installed package.

Batches are bilm-tf's: ``batch_size`` windows of ``seq_len`` positions (``seq_len - 2`` tokens of
running text between ``<S>`` and ``</S>``). Throughput counts what the trainer logs as
``tokens_per_s``: predictions per direction (``seq_len - 1`` per window). Peak memory spans the
warm-up and timed steps (gradients, optimizer state, activations) beyond the weights; the
absolute peak is reported too.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
from tqdm import tqdm

from spacy_elmo.bench.measure import MB, PeakMemory, Stopwatch
from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import default_text_path, text_lines
from spacy_elmo.nn.precision import TRAINING_PRECISIONS, runs_on

from .isolate import run_isolated
from .shapes import FIXED_SHAPES, bundled_recipe_path
from .text import token_stream, words_by_frequency

ORIGINAL_VOCAB_SIZE = 793_471


@dataclass
class PretrainCase:
    """A pretraining config (a file, or the package default) with overrides, and the size of
    the synthesized vocabulary."""

    name: str
    vocab_size: int
    config_path: Optional[Path] = None
    overrides: Dict[str, Any] = field(default_factory=dict)
    description: str = ""


def original_case() -> PretrainCase:
    from spacy_elmo.options import BiLMOptions
    from spacy_elmo.pretrain.config import model_overrides

    return PretrainCase(
        name="original",
        vocab_size=ORIGINAL_VOCAB_SIZE,
        overrides={
            **model_overrides(BiLMOptions.from_dict(FIXED_SHAPES["original"])),
            "objective.softmax": "sampled",
            "objective.n_negative_samples": 8192,
            "objective.dropout": 0.1,
            "optimizer.name": "adagrad",
            "optimizer.learning_rate": 0.2,
            "optimizer.initial_accumulator_value": 1.0,
            "optimizer.clip_norm": 10.0,
        },
        description="released original shape, bilm-tf objective (vocab 793,471, 8,192 samples, Adagrad)",
    )


def original_dense_case() -> PretrainCase:
    """The original case with dense softmax updates: what sparse row updates save."""
    case = original_case()
    case.name = "original-dense"
    case.overrides["objective.sparse_updates"] = False
    case.description = "the original case with a dense softmax gradient and update every step"
    return case


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
        description=f"the bundled model's recipe ({path})",
    )


def bundled_full_case() -> PretrainCase:
    """The bundled case with the full softmax: what its sampled softmax saves per token."""
    case = bundled_case()
    case.name = "bundled-full"
    case.overrides["objective.softmax"] = "full"
    case.description = "the bundled case with a full softmax over the whole vocabulary"
    return case


CASES = {
    "original": original_case,
    "original-dense": original_dense_case,
    "bundled": bundled_case,
    "bundled-full": bundled_full_case,
}


def write_vocab(path: Path, words: Sequence[str], size: int) -> Path:
    """bilm-tf's vocab layout (``<S>``, ``</S>``, ``<UNK>``, words by frequency), padded with
    synthetic words to exactly ``size`` entries."""
    specials = ["<S>", "</S>", "<UNK>"]
    real = [w for w in words if w not in specials][: size - len(specials)]
    synthetic = [f"<synthetic_{i}>" for i in range(size - len(specials) - len(real))]
    path.write_text("\n".join(specials + real + synthetic) + "\n", encoding="utf-8")
    return path


def measure_training(
    case: PretrainCase,
    text: Optional[str],
    batch_size: int,
    seq_len: int,
    warmup: int,
    steps: int,
    precision: str,
    device_name: str,
    threads: int,
    progress: bool = True,
) -> Dict[str, Any]:
    """Time ``steps`` training steps after ``warmup`` (meant to run in a fresh process)."""
    from spacy_elmo.pretrain.config import load_config, parse_settings
    from spacy_elmo.pretrain.model import make_batch
    from spacy_elmo.pretrain.trainer import Trainer

    device = torch.device(device_name)
    lines = text_lines(Path(text) if text else None)
    out = Path(tempfile.mkdtemp(prefix=f"bench-pretrain-{case.name}-"))
    try:
        vocab = write_vocab(out / "bench_vocab.txt", words_by_frequency(lines), case.vocab_size)
        overrides = {
            **case.overrides,
            "paths.train": str(text or default_text_path()),
            "paths.dev": None,
            "paths.vocab": str(vocab),
            "corpus.tokenized": True,
            "corpus.max_sequence_length": seq_len - 2,
            "training.batch_tokens": batch_size * seq_len,
            "training.precision": precision,
            "training.max_steps": warmup + steps + 1,
            "system.threads": threads,  # the trainer sets torch's thread count from it
        }
        trainer = Trainer(
            parse_settings(load_config(case.config_path, overrides)),
            out / "run",
            gpu_id=device.index or 0 if device.type == "cuda" else -1,
            show_progress=False,
        )
        words = token_stream(lines, (warmup + steps) * batch_size * (seq_len - 2))
        windows = [words[i : i + seq_len - 2] for i in range(0, len(words), seq_len - 2)]
        batches = [
            make_batch(windows[i * batch_size : (i + 1) * batch_size], trainer.vocab)
            for i in range(warmup + steps)
        ]
        bilm_params = sum(p.numel() for p in trainer.model.bilm.parameters())
        softmax_params = sum(p.numel() for p in trainer.model.softmax.parameters())
        bar = tqdm(
            total=warmup + steps,
            desc=f"{case.name} {precision} {device.type}",
            unit="step",
            leave=False,
            disable=not progress,
        )
        with PeakMemory(device) as peak:
            for batch in batches[:warmup]:
                trainer.train_step(batch)  # the trainer's own update, not a copy of it
                bar.update(1)
            with Stopwatch(device) as clock:
                for batch in batches[warmup:]:
                    trainer.train_step(batch)
                    bar.update(1)
        bar.close()
        targets = sum(b.n_targets for b in batches[warmup:])
        return {
            "case": case.name,
            "description": case.description,
            "vocab_size": len(trainer.vocab),
            "softmax": "sampled" if trainer.use_sampled else "full",
            "softmax_updates": "sparse rows" if trainer.sparse_updates else "dense",
            "n_negative_samples": trainer.settings.objective.n_negative_samples,
            "optimizer": trainer.settings.optimizer.name,
            "bilm_parameters": bilm_params,
            "softmax_parameters": softmax_params,
            "step_s": clock.seconds / max(steps, 1),
            "tokens_per_s": targets / clock.seconds,
            "peak_mb": peak.mb,
            "peak_total_mb": peak.total / MB,
            "peak_method": peak.method,
        }
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_pretrain_bench(
    cases: Sequence[PretrainCase],
    text: Optional[Path] = None,
    batch_size: int = 128,
    seq_len: int = 20,
    warmup: int = 1,
    steps: int = 3,
    precision: str = "fp32",
    device: str = "auto",
    threads: Optional[int] = None,
    isolate: bool = True,
    progress: bool = True,
) -> Dict[str, Any]:
    if precision not in TRAINING_PRECISIONS:
        raise ValueError(
            f"--precision must be one of {TRAINING_PRECISIONS}, got {precision!r}"
        )
    if seq_len < 3:
        raise ValueError(f"--seq-len must be at least 3 (<S>, a token, </S>), got {seq_len}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device")
    if not runs_on(precision, torch.device(device)):
        raise ValueError(f"--precision {precision} does not run on {device}")
    threads = threads or torch.get_num_threads()
    rows: List[Dict[str, Any]] = []
    for case in tqdm(cases, desc="pretrain", unit="case", disable=not progress):
        rows.append(
            run_isolated(
                measure_training, case, str(text) if text else None, batch_size, seq_len, warmup,
                steps, precision, device, threads, progress, isolate=isolate,
            )
        )
    return {
        "benchmark": "pretrain",
        "system": system_info(),
        "settings": {
            "batch_size": batch_size,
            "seq_len": seq_len,
            "warmup_steps": warmup,
            "timed_steps": steps,
            "precision": precision,
            "device": device,
            "threads": threads,
            "isolated_processes": isolate,
            "text": str(text or default_text_path()),
            "cases": {
                c.name: {"config": str(c.config_path or "default"), "overrides": c.overrides}
                for c in cases
            },
        },
        "rows": rows,
    }


PRETRAIN_COLUMNS = [
    ("case", "case", ""),
    ("vocab_size", "vocab", ","),
    ("softmax", "softmax", ""),
    ("softmax_updates", "updates", ""),
    ("optimizer", "optimizer", ""),
    ("bilm_parameters", "biLM params", ","),
    ("step_s", "s/step", ".2f"),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("peak_mb", "peak MB (steps)", ",.0f"),
    ("peak_total_mb", "peak MB (total)", ",.0f"),
]
