"""Numeric precision modes: the one place that says what "fp32", "tf32", "bf16" and "fp16" mean.

The biLM's ``forward``, the pretraining model, the trainer (grad scaler), both configs and the
benches all read ``PRECISIONS`` and enter ``precision_context``: adding a mode is one entry here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Dict, Iterator, Optional

import torch


@dataclass(frozen=True)
class Precision:
    """How a precision mode runs a model.

    autocast_dtype: the dtype of matrix products and convolutions under ``torch.autocast``, or
        None for float32 throughout.
    allow_tf32: whether CUDA float32 products, convolutions and the cuDNN LSTM may use
        TensorFloat-32 tensor cores. cuDNN allows it by default, so "fp32" must forbid it.
    needs_grad_scaler: training needs a loss scaler (float16 gradients underflow).
    """

    name: str
    autocast_dtype: Optional[torch.dtype]
    allow_tf32: bool
    needs_grad_scaler: bool


PRECISIONS: Dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", None, allow_tf32=False, needs_grad_scaler=False),
        Precision("tf32", None, allow_tf32=True, needs_grad_scaler=False),
        Precision("bf16", torch.bfloat16, allow_tf32=False, needs_grad_scaler=False),
        Precision("fp16", torch.float16, allow_tf32=False, needs_grad_scaler=True),
    )
}

#: The modes the pretraining loop accepts ("tf32" is an inference speed setting).
TRAINING_PRECISIONS = ("fp32", "bf16", "fp16")


def get_precision(name: str, what: str = "precision") -> Precision:
    """The mode called ``name``; ``what`` names the setting in the error (a config key)."""
    try:
        return PRECISIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"{what} must be one of {sorted(PRECISIONS)}, got {name!r}") from None


@contextlib.contextmanager
def precision_context(name: str, device: torch.device) -> Iterator[Precision]:
    """Run the block in mode ``name`` on ``device``: autocast to its dtype (if any), and the
    process-wide TF32 flags set for the block and restored after.

    The flags are set on every device (to False off CUDA, where TF32 does not exist), so that
    code that forgets to enter this context is caught by a CPU test reading the flags.
    """
    precision = get_precision(name)
    with tf32_allowed(precision.allow_tf32 and device.type == "cuda"):
        if precision.autocast_dtype is None:
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
