"""Optimizers and learning-rate schedules of pretraining, as registered functions.

``optimizer.name`` and ``optimizer.schedule`` in the config name an entry of these registries
(catalogue, as Thinc's ``@schedules``), and the config validates against what is registered:
adding an optimizer or a schedule is one decorated function here. ``clip_grad_norm`` clips the
update's gradients, sparse softmax rows included.
"""

from __future__ import annotations

from typing import Annotated, Callable, Iterable, Optional

import catalogue
import torch
from pydantic import AfterValidator

from ..validation import Fraction, NonNegativeNumber, PositiveNumber, StrictNonNegative
from .section import Section

optimizers = catalogue.create("spacy_elmo", "optimizers")
schedules = catalogue.create("spacy_elmo", "schedules")


def _registered(registry: catalogue.Registry) -> Callable[[str], str]:
    """A check that a name is registered now (not when this module was imported)."""

    def check(name: str) -> str:
        if name not in registry.get_all():
            raise ValueError(f"must be one of {tuple(sorted(registry.get_all()))}")
        return name

    return check


class OptimizerSettings(Section):
    """The ``[optimizer]`` config section: ``name`` and ``schedule`` name registered functions."""

    name: Annotated[str, AfterValidator(_registered(optimizers))]
    learning_rate: PositiveNumber
    initial_accumulator_value: NonNegativeNumber
    beta1: Fraction
    beta2: Fraction
    weight_decay: NonNegativeNumber
    # Gradients are clipped to this global norm; null: no clipping.
    clip_norm: Optional[PositiveNumber]
    warmup_steps: StrictNonNegative
    schedule: Annotated[str, AfterValidator(_registered(schedules))]


#: A schedule: (warmup steps, total steps) -> (step -> learning-rate factor).
Schedule = Callable[[int, int], Callable[[int], float]]


@optimizers.register("adagrad")
def adagrad(
    parameters: Iterable[torch.nn.Parameter], o: OptimizerSettings, graph_device: Optional[torch.device] = None
) -> torch.optim.Optimizer:
    """The paper's optimizer (bilm-tf: lr 0.2, initial accumulator 1.0). With ``graph_device``
    (a recorded CUDA graph or a compiled step) the learning rate is a tensor there, which the
    scheduler updates in place; without learning-rate decay, the step counts Adagrad keeps on
    the host do not enter the update."""
    return torch.optim.Adagrad(
        parameters,
        lr=_learning_rate(o, graph_device),
        initial_accumulator_value=o.initial_accumulator_value,
        weight_decay=o.weight_decay,
        foreach=True if graph_device is not None else None,
    )


@optimizers.register("adam")
def adam(
    parameters: Iterable[torch.nn.Parameter], o: OptimizerSettings, graph_device: Optional[torch.device] = None
) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay); with ``graph_device``, torch's capturable variant (its
    step counts and learning rate on the device), else its fused kernel where torch has one for
    the CPU (torch 2.4 on: one pass per parameter)."""
    capturable = graph_device is not None
    return torch.optim.AdamW(
        parameters,
        lr=_learning_rate(o, graph_device),
        betas=(o.beta1, o.beta2),
        weight_decay=o.weight_decay,
        capturable=capturable,
        fused=True if not capturable and torch.__version__ >= (2, 4) else None,  # fused on the CPU too
    )


def _learning_rate(o: OptimizerSettings, graph_device: Optional[torch.device]):
    if graph_device is None:
        return o.learning_rate
    return torch.tensor(o.learning_rate, dtype=torch.float32, device=graph_device)


def _warmup(warmup: int, after: Callable[[int], float]) -> Callable[[int], float]:
    """Linear warm-up over the first ``warmup`` steps, then ``after``."""

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        return after(step)

    return factor


@schedules.register("constant")
def constant(warmup: int, total: int) -> Callable[[int], float]:
    return _warmup(warmup, lambda step: 1.0)


@schedules.register("linear")
def linear(warmup: int, total: int) -> Callable[[int], float]:
    """Linear decay to 0 at ``total`` steps, after the warm-up."""
    return _warmup(warmup, lambda step: max(0.0, (total - step) / max(1, total - warmup)))


def adagrad_rows(optimizer: torch.optim.Optimizer, param: torch.nn.Parameter, rows: torch.Tensor) -> None:
    """Adagrad's step of ``param``'s ``rows`` alone (repeats allowed), in ``optimizer``'s own state.
    Adagrad's dense step leaves a row whose gradient is zero and its sum as they are (without
    weight decay), so where only known rows have gradients (a sampled softmax's) this is that
    step without reading and writing the whole vocabulary's weight, sum and gradient."""
    group = next(g for g in optimizer.param_groups if any(p is param for p in g["params"]))
    state = optimizer.state[param]
    state["step"] += 1
    learning_rate = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
    grad = param.grad.index_select(0, rows)
    sums = state["sum"].index_select(0, rows).addcmul_(grad, grad)
    state["sum"].index_copy_(0, rows, sums)
    update = grad.div_(sums.sqrt_().add_(group["eps"])).mul_(learning_rate)
    with torch.no_grad():
        param.index_copy_(0, rows, param.index_select(0, rows).sub_(update))


def make_optimizer(
    model: torch.nn.Module, o: OptimizerSettings, graph_device: Optional[torch.device] = None
) -> torch.optim.Optimizer:
    """``[optimizer] name``'s optimizer; ``graph_device``: a GPU whose recorded or compiled step
    runs it (learning rate and state read there, never from the host)."""
    return optimizers.get(o.name)(model.parameters(), o, graph_device)


def make_scheduler(
    optimizer: torch.optim.Optimizer, o: OptimizerSettings, max_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, schedules.get(o.schedule)(o.warmup_steps, max_steps))


def clip_grad_norm(parameters: Iterable[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` that also takes sparse gradients (the softmax rows):
    scales every gradient by min(1, max_norm / global norm); returns the global norm."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    norms = [
        torch.linalg.vector_norm(g.coalesce().values() if g.is_sparse else g, dtype=torch.float32)
        for g in grads
    ]
    total = torch.linalg.vector_norm(torch.stack(norms))
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device, g.dtype))
    return total
