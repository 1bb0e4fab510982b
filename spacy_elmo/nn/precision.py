"""Numeric precision modes: the one place that says what "fp32", "bf16", "fp16" and "int8" mean, and
the one place that enters ``torch.autocast``.

A mode travels with the model and the calling thread, never the process: autocast is thread-local
and "int8" a context variable; process-wide switches (TF32) are the caller's (docs/guide/speed.md).
Adding a mode is one entry in ``PRECISIONS``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Dict, Iterator, Literal, Optional

import torch

from .int8 import int8_products


@dataclass(frozen=True)
class Precision:
    """How a precision mode runs a model.

    autocast_dtype: the dtype of products under ``torch.autocast``, or None for float32.
    needs_grad_scaler: training needs a loss scaler (float16 gradients underflow).
    int8: the biLM's linear products run on int8 weights (the CPU only, no gradients)."""

    name: str
    autocast_dtype: Optional[torch.dtype]
    needs_grad_scaler: bool
    int8: bool = False


PRECISIONS: Dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", None, needs_grad_scaler=False),
        Precision("bf16", torch.bfloat16, needs_grad_scaler=False),
        Precision("fp16", torch.float16, needs_grad_scaler=True),
        Precision("int8", None, needs_grad_scaler=False, int8=True),
    )
}

#: A mode's name, as a setting annotates it.
PrecisionName = Literal[tuple(PRECISIONS)]  # type: ignore[valid-type]

#: The modes the pretraining loop accepts ("int8" is an inference speed setting; "tf32" is a
#: training process's setting: ``training_precision``).
TRAINING_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def get_precision(name: str, what: str = "precision") -> Precision:
    """The mode called ``name``; ``what`` names the setting in the error (a config key)."""
    try:
        return PRECISIONS[name]
    except (KeyError, TypeError):
        hint = ""
        if name == "tf32":
            hint = (
                ": TF32 is a process-wide PyTorch setting, which the package leaves to you; use "
                "'fp32' and set torch.backends.cuda.matmul.allow_tf32 = True (and "
                "torch.backends.cudnn.allow_tf32) once in your program"
            )
        raise ValueError(f"{what} must be one of {sorted(PRECISIONS)}, got {name!r}{hint}") from None


def runs_on(name: str, device: torch.device) -> bool:
    """Whether mode ``name`` runs as itself on ``device`` (``torch.autocast`` runs an unsupported
    dtype as float32 under the mode's name): what benches and tests ask first."""
    precision = get_precision(name)
    if precision.int8:
        return device.type == "cpu"
    if precision.autocast_dtype is None:
        return True
    if device.type == "cuda":
        return precision.autocast_dtype != torch.bfloat16 or torch.cuda.is_bf16_supported()
    return device.type == "cpu"


@contextlib.contextmanager
def precision_context(name: str, device: torch.device, *, weight_cache: bool = True) -> Iterator[Precision]:
    """Run the block in mode ``name`` on ``device``, in this thread (autocast is per thread);
    ``weight_cache=False`` for a CUDA graph recording, which must own its casts."""
    precision = get_precision(name)
    if precision.int8 and device.type != "cpu":
        raise ValueError(f"precision {name!r} runs on the CPU; on {device.type} use 'bf16' or 'fp16'")
    if precision.int8:
        with int8_products():
            yield precision
    elif precision.autocast_dtype is None:
        yield precision
    else:
        with torch.autocast(
            device_type=device.type, dtype=precision.autocast_dtype, cache_enabled=weight_cache
        ):
            yield precision


def training_precision(name: str, device: torch.device) -> str:
    """The mode for ``[training] precision = name``; "tf32" is "fp32" with PyTorch's TF32 switches
    turned on here, once, on CUDA (the command owns its process; the pipe never writes them)."""
    if name != "tf32":
        return get_precision(name, "[training] precision").name
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    return "fp32"


def autocast_dtype_now(device_type: str) -> Optional[torch.dtype]:
    """The dtype of products under the ``torch.autocast`` in force on ``device_type``, or None."""
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        if not torch.is_autocast_enabled(device_type):
            return None
        return torch.get_autocast_dtype(device_type)
    if device_type == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None


def autocast_disabled(device_type: str) -> contextlib.AbstractContextManager:
    """A block without autocast on ``device_type``, whose code casts by hand."""
    return torch.autocast(device_type=device_type, enabled=False)


def compiling() -> bool:
    """Whether ``torch.compile`` is tracing the caller (False on torch < 2.3, which cannot say)."""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling and is_compiling())
