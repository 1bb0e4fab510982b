"""Numeric precision modes: the one place that says what "fp32", "tf32", "bf16", "fp16" and "int8"
mean.

The biLM's ``forward``, the pretraining model, the trainer (grad scaler), both configs and the
benches all read ``PRECISIONS`` and enter ``precision_context``: adding a mode is one entry here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Dict, Iterator, Optional

import torch

from .int8 import int8_products


@dataclass(frozen=True)
class Precision:
    """How a precision mode runs a model.

    autocast_dtype: the dtype of matrix products and convolutions under ``torch.autocast``, or
        None for float32 throughout.
    allow_tf32: whether CUDA float32 products, convolutions and the cuDNN LSTM may use
        TensorFloat-32 tensor cores. cuDNN allows it by default, so "fp32" must forbid it.
    needs_grad_scaler: training needs a loss scaler (float16 gradients underflow).
    int8: the biLM's linear products run on int8 weights (``nn/int8.py``; the CPU only, no
        gradients: products that need one run in float32).
    """

    name: str
    autocast_dtype: Optional[torch.dtype]
    allow_tf32: bool
    needs_grad_scaler: bool
    int8: bool = False


PRECISIONS: Dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", None, allow_tf32=False, needs_grad_scaler=False),
        Precision("tf32", None, allow_tf32=True, needs_grad_scaler=False),
        Precision("bf16", torch.bfloat16, allow_tf32=False, needs_grad_scaler=False),
        Precision("fp16", torch.float16, allow_tf32=False, needs_grad_scaler=True),
        Precision("int8", None, allow_tf32=False, needs_grad_scaler=False, int8=True),
    )
}

#: The modes the pretraining loop accepts ("int8" is an inference speed setting; "tf32" is
#: "fp32" off CUDA).
TRAINING_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def get_precision(name: str, what: str = "precision") -> Precision:
    """The mode called ``name``; ``what`` names the setting in the error (a config key)."""
    try:
        return PRECISIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be one of {sorted(PRECISIONS)}, got {name!r}") from None


def runs_on(name: str, device: torch.device) -> bool:
    """Whether mode ``name`` runs as itself on ``device``: what a bench or test asks before it
    measures a mode, instead of probing ``torch.autocast`` (which, for a dtype it does not take,
    warns and runs float32 under the mode's name).

    "tf32" exists only on CUDA (elsewhere it is "fp32"); an autocast mode needs ``torch.autocast``
    for the device type, and bf16 on CUDA a GPU with bfloat16. On the CPU, ``torch.autocast`` takes
    bfloat16 and, in recent releases (2.13 among them), float16 too; other device types: False.
    """
    precision = get_precision(name)
    if precision.allow_tf32:
        return device.type == "cuda"
    if precision.int8:
        return device.type == "cpu"
    if precision.autocast_dtype is None:
        return True
    if device.type == "cuda":
        return precision.autocast_dtype != torch.bfloat16 or torch.cuda.is_bf16_supported()
    return device.type == "cpu"


@contextlib.contextmanager
def precision_context(name: str, device: torch.device) -> Iterator[Precision]:
    """Run the block in mode ``name`` on ``device``: autocast to its dtype (if any), and the
    process-wide TF32 flags set for the block and restored after.

    The flags are set on every device (to False off CUDA, where TF32 does not exist), so that
    code that forgets to enter this context is caught by a CPU test reading the flags.
    """
    precision = get_precision(name)
    if precision.int8 and device.type != "cpu":
        raise ValueError(
            f"precision {name!r} runs on the CPU; on {device.type} use 'bf16', 'fp16' or 'tf32'"
        )
    with tf32_allowed(precision.allow_tf32 and device.type == "cuda"):
        if precision.int8:
            with int8_products():
                yield precision
        elif precision.autocast_dtype is None:
            yield precision
        else:
            with torch.autocast(device_type=device.type, dtype=precision.autocast_dtype):
                yield precision


@contextlib.contextmanager
def tf32_allowed(allowed: bool) -> Iterator[None]:
    """Allow or forbid TensorFloat-32 in float32 CUDA matrix products and cuDNN (convolutions,
    LSTM) for the block; the previous settings come back after."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def tf32_flags() -> tuple:
    """(matmul, cudnn) TF32 flags as they are now: what tests and benches check."""
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def autocast_dtype_now(device_type: str) -> Optional[torch.dtype]:
    """The dtype of products under the ``torch.autocast`` in force on ``device_type``, None
    outside one: for code that casts by hand (a custom autograd function)."""
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
    """Whether ``torch.compile`` is tracing the calling code (False on torch < 2.3, which cannot
    say: the caller then takes its eager path)."""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling and is_compiling())
