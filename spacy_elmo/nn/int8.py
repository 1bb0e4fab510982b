"""Int8 products for CPU inference: what the "int8" precision mode runs (``nn/precision.py``).

The LSTM's few rows per step are bound by reading weights, and int8 weights are a quarter of the
bytes. Weights per output channel, inputs per row, on ``torch._int_mm`` or FBGEMM
(``int8_backend``), dequantized in float32; the prepared weights live beside the float ones and
follow their version. Why 7 bits and how FBGEMM's input becomes per row: docs/design.md.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from contextvars import ContextVar
from typing import Iterator, Optional, Tuple

import torch

from .cpuinfo import cpuinfo
from .versions import weights_key

#: Smallest scale: an all-zero row or channel quantizes to zeros, not to NaN.
_TINY = 1e-12
_ACTIVE: ContextVar[bool] = ContextVar("spacy_elmo_int8_products", default=False)


@contextlib.contextmanager
def int8_products() -> Iterator[None]:
    """Run the block's linear products of the biLM in int8 (where no gradient is needed)."""
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def int8_wanted(*weights: torch.Tensor) -> bool:
    """Inside ``int8_products``, for weights that need no gradient now: float32 fine-tuning and
    training never run on int8 (asked first: a compiled training step cannot read the switch)."""
    if torch.is_grad_enabled() and any(w.requires_grad for w in weights):
        return False
    return _ACTIVE.get()


def _row_absmax(x: torch.Tensor) -> torch.Tensor:
    """(n, k) float32 -> (n, 1): each row's largest magnitude, at least ``_TINY``."""
    return x.abs().amax(dim=1, keepdim=True).clamp_min_(_TINY)


def quantize_rows(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(n, k) float -> (int8 (n, k), float32 scales (n, 1)), symmetric per row."""
    x = x.float()
    scales = _row_absmax(x).div_(127.0)
    return torch.round(x / scales).to(torch.int8), scales


class Int8Weight:
    """A weight (out, in) quantized per output channel for ``x @ weight.T`` (``int8_backend``)."""

    def __init__(self, weight: torch.Tensor) -> None:
        if weight.device.type != "cpu":
            raise ValueError(
                f"precision 'int8' runs on the CPU; this biLM is on {weight.device} (on a GPU use "
                "'bf16' or 'fp16')"
            )
        self.backend = int8_backend()
        levels = 127.0 if self.backend == "fbgemm" else weight_levels()
        w = weight.detach().float()
        scale = w.abs().amax(dim=1).clamp_min(_TINY) / levels
        self.scale = scale.contiguous()
        self.shape = tuple(w.shape)
        if self.backend == "fbgemm":
            self.packed = _fbgemm_pack(w, self.scale)
        else:
            #: (in, out) int8: the transposed view ``torch._int_mm`` reads as its right operand.
            self.q_t = torch.round(w / scale[:, None]).to(torch.int8).t()
        self.key = weights_key([weight])

    @classmethod
    def for_weight(cls, weight: torch.Tensor, holder: torch.nn.Module, key: str) -> "Int8Weight":
        """The prepared weight kept on ``holder``, prepared again once the weight has changed."""
        cached: Optional[Int8Weight] = holder.__dict__.get(key)
        if cached is None or cached.key != weights_key([weight]):
            cached = cls(weight)
            holder.__dict__[key] = cached
        return cached

    def __call__(self, x: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(n, in) float -> (n, out) float32 (+ bias)."""
        if self.backend == "fbgemm":
            x = x.float()
            scales = _row_absmax(x).mul_(64.0 / 63.0)
            rows = torch.cat([x / scales, _range_row(x.shape[1])])
            y = torch.ops.quantized.linear_dynamic(rows, self.packed, True)[:-1].mul_(scales)
        else:
            x_q, x_scales = quantize_rows(x)
            y = int8_matmul(x_q, self.q_t).float().mul_(x_scales).mul_(self.scale)
        return y if bias is None else y.add_(bias)


@functools.lru_cache(maxsize=8)
def _range_row(width: int) -> torch.Tensor:
    """The row that fixes FBGEMM's per-tensor range to [-1, 63/64] (see the module docstring)."""
    row = torch.zeros(1, width)
    row[0, 0], row[0, 1 % width] = 63.0 / 64.0, -1.0
    return row


def _fbgemm_pack(w: torch.Tensor, scale: torch.Tensor):
    """FBGEMM's packed form of ``w`` quantized per output channel with ``scale`` (zero points 0)."""
    zero_points = torch.zeros(w.shape[0], dtype=torch.long)
    with warnings.catch_warnings():  # the deprecation of quantized tensors: see the module docstring
        warnings.simplefilter("ignore")
        q = torch.quantize_per_channel(w, scale.double(), zero_points, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(q, None)


def _cpu_has_vnni() -> bool:
    flags = (cpuinfo("flags") or "").split()
    return "avx512_vnni" in flags or "avx_vnni" in flags


@functools.lru_cache(maxsize=None)
def int8_backend() -> str:
    """``"fbgemm"`` on x86 without VNNI where it runs, else ``"int_mm"``; fixed per process."""
    if _cpu_has_vnni() or "fbgemm" not in torch.backends.quantized.supported_engines:
        return "int_mm"
    try:
        w = torch.linspace(-1, 1, 64 * 32).reshape(64, 32)
        x = torch.linspace(-2, 2, 4 * 32).reshape(4, 32)
        y = torch.ops.quantized.linear_dynamic(x, _fbgemm_pack(w, w.abs().amax(dim=1) / 127.0), True)
    except (AttributeError, RuntimeError, NotImplementedError):  # a PyTorch without it
        return "int_mm"
    exact = x @ w.t()
    return "fbgemm" if float((y - exact).abs().max()) < 0.05 * float(exact.abs().max()) else "int_mm"


def int8_linear(linear: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``linear(x)`` in int8 when ``int8_wanted``, else as usual. x: (..., in)."""
    if not int8_wanted(linear.weight):
        return linear(x)
    weight = Int8Weight.for_weight(linear.weight, linear, "_int8_weight")
    y = weight(x.reshape(-1, x.shape[-1]), linear.bias)
    return y.reshape(*x.shape[:-1], y.shape[-1])


@functools.lru_cache(maxsize=None)
def weight_levels() -> float:
    """The largest weight magnitude this CPU's ``torch._int_mm`` sums exactly: 127, or 63 where it
    saturates; probed once (a clear error where the build has no CPU int8 product)."""
    if _int_mm_is_exact(127):
        return 127.0
    if _int_mm_is_exact(63):
        return 63.0
    raise RuntimeError(
        f"precision 'int8': torch._int_mm of PyTorch {torch.__version__} does not sum int8 "
        "products exactly on this CPU, even with 7-bit weights; use precision 'bf16' or 'fp32'"
    )


def int8_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(n, k) int8 @ (k, m) int8 -> (n, m) int32, exact: the one call of ``torch._int_mm``."""
    return torch._int_mm(a, b)


def _int_mm_is_exact(level: int) -> bool:
    """Whether rows of +127 times a weight matrix of +``level`` give the exact int32 sums (the
    shapes of a real product, so that the kernel a real product gets is the one probed)."""
    x = torch.full((32, 512), 127, dtype=torch.int8)
    w = torch.full((64, 512), level, dtype=torch.int8).t()
    try:
        got = int8_matmul(x, w)
    except (AttributeError, RuntimeError, NotImplementedError) as err:
        raise RuntimeError(
            f"precision 'int8' needs torch._int_mm on the CPU, which PyTorch {torch.__version__} "
            f"lacks ({err}); upgrade PyTorch, or use precision 'bf16' or 'fp32'"
        ) from err
    return bool((got == 127 * level * 512).all())
