"""Checkpoints of a pretraining run: what ``--resume`` needs to continue it bit for bit (the
docs/reference/pretraining-config.md, "The output directory").

The state holds tensors and plain values only, so that it loads with
``torch.load(weights_only=True)``: a checkpoint someone shares cannot run code on ``--resume``.
Kept apart from the trainer, which decides when to save and what to restore; what a resumed
config may change is ``resume.py``'s.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np
import torch
from safetensors.torch import save_file

from ..distributed import DistributedContext
from ..files import replacing
from ..formats.native import save_bilm
from ..nn.bilm import BiLMStates
from .config import ConfigError
from .corpus import DataPosition
from .model import BiLMLanguageModel
from .run_files import CHECKPOINT_DIR, METRICS_NAME, SOFTMAX_NAME, STATE_FILE, VOCAB_NAME
from .vocab import Vocab, VocabError


@dataclass
class TrainingState:
    """The objects of a run whose state a checkpoint saves and a resume restores in place."""

    model: BiLMLanguageModel
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    generator: torch.Generator  # the softmax sampler's on sentence batches
    carried: "CarriedStates"  # the LSTM states windows pass on (each rank its own)


@dataclass
class CarriedStates:
    """The LSTM states the last window batch ended with, where the next one starts (None before
    the first batch, and always with sentence batches)."""

    states: Optional[BiLMStates] = None

    def update(self, new: BiLMStates) -> None:
        """Take ``new``'s values, in place (a recorded CUDA graph reads these tensors)."""
        for old_layers, new_layers in ((self.states.forward, new.forward), (self.states.backward, new.backward)):
            for (h, c), (new_h, new_c) in zip(old_layers, new_layers):
                h.copy_(new_h)
                c.copy_(new_c)

    def as_lists(self) -> Optional[Dict[str, List[List[torch.Tensor]]]]:
        """The states as plain lists of CPU tensors (what a safe checkpoint holds)."""
        if self.states is None:
            return None
        as_lists = lambda layers: [[h.cpu(), c.cpu()] for h, c in layers]  # noqa: E731
        return {"forward": as_lists(self.states.forward), "backward": as_lists(self.states.backward)}

    @classmethod
    def from_lists(cls, saved: Optional[Dict[str, List[List[torch.Tensor]]]], device: torch.device) -> "CarriedStates":
        if saved is None:
            return cls()
        on_device = lambda layers: [(h.to(device), c.to(device)) for h, c in layers]  # noqa: E731
        return cls(BiLMStates(on_device(saved["forward"]), on_device(saved["backward"])))


class Progress(NamedTuple):
    """Where a resumed run continues: its counters and this rank's place in the corpus."""

    step: int
    tokens_seen: int
    position: DataPosition
    #: The run's training time so far, all sessions (0 for checkpoints written before it was kept).
    seconds: float


def checkpoint_path(output_dir: Path) -> Path:
    """The resumable training state of the run in ``output_dir``."""
    return output_dir / CHECKPOINT_DIR / STATE_FILE


def save_checkpoint(
    output_dir: Path,
    ctx: DistributedContext,
    state: TrainingState,
    vocab: Vocab,
    step: int,
    tokens_seen: int,
    position: DataPosition,
    model_files: bool = True,
    seconds: float = 0.0,
) -> None:
    """Write the loadable model files (unless ``model_files`` is false: early stopping keeps
    the best ones) and the resumable training state. Every rank calls it (each rank's data
    position and RNG states are gathered); rank 0 writes."""
    per_rank = ctx.gather_objects(
        {
            "position": asdict(position),
            "rng": _rng_state(),
            "generator": state.generator.get_state(),
            "lstm_states": state.carried.as_lists(),
        }
    )
    if not ctx.is_main:
        ctx.barrier()
        return
    model = state.model
    if model_files:
        save_bilm(model.bilm, output_dir)
        with replacing(output_dir / SOFTMAX_NAME) as temporary:
            save_file({k: v.detach().cpu().contiguous() for k, v in model.softmax.state_dict().items()}, str(temporary))
    saved = {
        "step": step,
        "tokens_seen": tokens_seen,
        "seconds": seconds,
        "world_size": ctx.world_size,
        "vocab_sha1": _vocab_hash(vocab),
        "vocab_size": len(vocab),
        "model": model.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(),
        "scaler": state.scaler.state_dict(),
        "ranks": per_rank,
    }
    path = checkpoint_path(output_dir)
    path.parent.mkdir(exist_ok=True)
    with replacing(path) as temporary:
        torch.save(saved, temporary)
    ctx.barrier()


def load_checkpoint(
    output_dir: Path, ctx: DistributedContext, state: TrainingState, vocab: Vocab
) -> Progress:
    """Restore ``state`` and this process's RNG states from the run's checkpoint, refusing one
    trained with another vocabulary, number of processes or model shape."""
    path = checkpoint_path(output_dir)
    try:
        saved = torch.load(path, map_location=ctx.device, weights_only=True)
    except pickle.UnpicklingError as err:
        raise ConfigError(
            f"{path}: not a checkpoint this version can resume safely (it holds objects other than "
            f"tensors and plain values): {err}. Start a new run from its model instead: "
            f"--paths.init_bilm {output_dir}"
        ) from None
    if saved["vocab_sha1"] != _vocab_hash(vocab) or saved["vocab_size"] != len(vocab):
        raise VocabError(
            f"{output_dir / VOCAB_NAME}: this vocabulary ({len(vocab)} words) is not "
            f"the one checkpoint {path} was trained with ({saved['vocab_size']} words)"
        )
    if saved["world_size"] != ctx.world_size:
        raise ConfigError(
            f"{path} was written by {saved['world_size']} processes; resume with the same "
            f"number (now {ctx.world_size}) so every rank continues its own shard"
        )
    try:
        state.model.load_state_dict(saved["model"])
    except RuntimeError as err:
        raise ConfigError(
            f"{path}: the checkpoint does not match the [model] config: {err}"
        ) from err
    state.optimizer.load_state_dict(with_run_settings(saved["optimizer"], state.optimizer))
    state.scheduler.load_state_dict(saved["scheduler"])
    state.scaler.load_state_dict(saved["scaler"])
    mine = saved["ranks"][ctx.rank]
    state.generator.set_state(mine["generator"].cpu())
    state.carried.states = CarriedStates.from_lists(mine.get("lstm_states"), ctx.device).states
    _set_rng_state(mine["rng"])
    return Progress(saved["step"], saved["tokens_seen"], DataPosition(**mine["position"]), saved.get("seconds", 0.0))


#: Optimizer settings that say how this run's step runs, not where training stands: a resumed
#: run keeps its own (``training.step`` may change on resume: eager, recorded or compiled).
RUN_SETTINGS = ("capturable", "fused", "foreach", "differentiable")


def with_run_settings(saved: Dict[str, Any], optimizer: torch.optim.Optimizer) -> Dict[str, Any]:
    """``saved`` (an optimizer's state dict) with ``optimizer``'s own ``RUN_SETTINGS`` and the type
    of its learning rate: a device tensor for a recorded or compiled step, which the scheduler
    updates in place (a number loaded in its place would be baked into the graph), a number for
    an eager one. ``load_state_dict`` then places each state (AdamW's step counts) as they need."""
    groups = []
    for group, mine in zip(saved["param_groups"], optimizer.param_groups):
        group = {**group, **{key: mine[key] for key in RUN_SETTINGS if key in mine}}
        lr = float(group["lr"])
        if isinstance(mine["lr"], torch.Tensor):
            lr = torch.tensor(lr, dtype=mine["lr"].dtype, device=mine["lr"].device)
        groups.append({**group, "lr": lr})
    return {**saved, "param_groups": groups}


def drop_metrics_after(output_dir: Path, step: int) -> None:
    """Remove the metrics.jsonl rows of steps after ``step``: a run killed between
    checkpoints (no Ctrl-C: SIGKILL, a lost machine) logged steps that resuming from its last
    checkpoint computes again, and they would otherwise appear twice in the curve."""
    path = output_dir / METRICS_NAME
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
    if len(kept) < len(lines):
        with replacing(path) as temporary:
            temporary.write_text("".join(line + "\n" for line in kept), encoding="utf-8")


def _rng_state() -> Dict[str, Any]:
    """Every generator's state as tensors and plain values (NumPy's key array as a list)."""
    kind, key, position, has_gauss, cached = np.random.get_state()
    state: Dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [kind, key.tolist(), position, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Dict[str, Any]) -> None:
    random.setstate(state["python"])
    kind, key, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(key, dtype=np.uint32), position, has_gauss, cached))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _vocab_hash(vocab: Vocab) -> str:
    return hashlib.sha1("\n".join(vocab.words).encode("utf-8")).hexdigest()
