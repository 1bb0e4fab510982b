"""The training step of window batches without the host: one CUDA graph, or compiled (``[training]
step``; docs/reference/pretraining-config.md, [training] step).

Window batches all have one shape and ``Trainer.window_update`` reads nothing back from the
device, so the whole update can be recorded once and replayed, compiled, or both; a batch that
does not fit the recorded shapes, and the softmax-only steps, run the same update eagerly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

import torch

from .config import ConfigError, check_step
from .model import LMBatch

if TYPE_CHECKING:  # the trainer imports this module
    from .trainer import Trainer

#: Eager updates before the recording (DDP needs 11 before NCCL collectives are recorded).
WARMUP_STEPS = 3
DDP_WARMUP_STEPS = 11


def resolve_step_kind(kind: str, windows: bool, device: torch.device, precision: str) -> str:
    """The runner of ``[training] step = kind``: ``"auto"`` is ``"cuda_graph"`` for windows on a
    GPU (without fp16, whose loss scaler reads the device), else ``"eager"``."""
    if kind == "auto":
        graphable = windows and device.type == "cuda" and precision != "fp16"
        return "cuda_graph" if graphable else "eager"
    if kind == "eager":
        return kind
    check_step(kind, windows, precision)
    if kind in ("cuda_graph", "compile_graph") and device.type != "cuda":
        raise ConfigError(
            f'[training] step = "{kind}" runs on a GPU (--gpu-id); on the CPU use "eager" (or "compile")'
        )
    if torch.__version__ < (2, 4):  # learning rates as device tensors
        raise ConfigError(
            f'[training] step = "{kind}" needs torch >= 2.4 (learning rates as device tensors), '
            f'this is {torch.__version__}: use step = "eager"'
        )
    return kind


class StaticStep:
    """Runs ``trainer.window_update`` on static buffers: recorded as a CUDA graph (``kind`` =
    ``"cuda_graph"``), compiled (``"compile"``; ``compile_options`` go to ``torch.compile``), or
    compiled and recorded (``"compile_graph"``).
    ``distinct_rows``: the fixed number of distinct tokens per batch."""

    def __init__(
        self,
        trainer: "Trainer",
        kind: str,
        distinct_rows: int,
        compile_options: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.trainer = trainer
        self.kind = kind
        self.distinct_rows = distinct_rows
        self._graph: Optional[torch.cuda.CUDAGraph] = None
        self._inputs: Optional[LMBatch] = None
        self._nll: Optional[torch.Tensor] = None
        self._eager_updates = 0
        self.forward: Callable = trainer.ddp_model
        self.update: Callable = trainer.clip_and_step
        if kind in ("compile", "compile_graph"):
            options = compile_options or {}
            self.forward = compile_with_lstms(trainer.ddp_model, **options)
            if trainer.device.type == "cuda":  # torch.compile breaks on the CPU optimizers' step
                self.update = compile_with_lstms(trainer.clip_and_step, **options)

    def accepts(self, batch: LMBatch) -> bool:
        """Whether ``batch`` runs here (else eagerly): it fits the fixed shapes, and the biLM trains."""
        return batch.n_distinct <= self.distinct_rows and not self.trainer.model.bilm_frozen

    def __call__(self, batch: LMBatch) -> torch.Tensor:
        """One update on ``batch``; returns its summed NLL of both directions, (2,) on the device."""
        if self.kind == "compile":
            self.trainer.optimizer.zero_grad(set_to_none=True)
            return self.trainer.window_update(_padded(batch, self.distinct_rows), self.forward, self.update)
        return self._replay(batch)

    def _replay(self, batch: LMBatch) -> torch.Tensor:
        trainer = self.trainer
        padded = _padded(batch, self.distinct_rows)
        if self._inputs is None:
            self._inputs = padded
        else:
            for static, new in ((self._inputs.char_ids, padded.char_ids), (self._inputs.index, padded.index),
                                (self._inputs.targets, padded.targets)):  # fmt: skip
                static.copy_(new, non_blocking=True)
        warmup = DDP_WARMUP_STEPS if trainer.ctx.distributed else WARMUP_STEPS
        if self._graph is None and self._eager_updates < warmup:
            self._eager_updates += 1
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                trainer.optimizer.zero_grad(set_to_none=True)
                nll = trainer.window_update(self._inputs, self.forward, self.update)
            torch.cuda.current_stream().wait_stream(side)
            return nll
        if self._graph is None:
            # Gradients are None before the recording: the recorded backward then writes them
            # into memory of the graph's own, which every replay overwrites.
            trainer.optimizer.zero_grad(set_to_none=True)
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._graph):
                self._nll = trainer.window_update(self._inputs, self.forward, self.update)
        self._graph.replay()
        return self._nll.clone()


def compile_with_lstms(function: Callable, **options: Any) -> Callable:
    """``torch.compile(function, **options)`` for code that holds ``ClippedLSTM`` layers.

    Dynamo refuses to trace any ``torch.nn.LSTM`` module (the layers are one, for torch's
    parameter names and its fused kernel) unless its private ``allow_rnn`` switch is on; the
    window step calls only the layers' own cell and dense loop, or, unclipped on CUDA, torch's
    fused LSTM. The switch is confined here, and tests/test_static_step.py fails loudly when it
    changes."""
    compiled = torch.compile(function, **options)

    def run(*args: Any, **kwargs: Any) -> Any:
        with torch._dynamo.config.patch(allow_rnn=True):
            return compiled(*args, **kwargs)

    return run


def _padded(batch: LMBatch, rows: int) -> LMBatch:
    """``batch`` with its char ids padded to ``rows`` distinct tokens (all-padding rows)."""
    extra = rows - batch.char_ids.shape[0]
    if extra == 0:
        return batch
    char_ids = torch.nn.functional.pad(batch.char_ids, (0, 0, 0, extra))
    return LMBatch(char_ids, batch.index, batch.targets, None, batch.n_distinct)
