"""The one engine that runs computations which share nothing side by side (the biLM's two
directions, shards of a batch): ``run_side_by_side_of(runs, x, how)`` is ``[run(x) for run in
runs]``, ``"sequential"``, on ``"threads"`` (with gradients one autograd node, ``_ThreadedRuns``) or
on CUDA ``"streams"`` (the same ops in the same order: the same numbers).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Dict, Hashable, Iterator, List, Optional, Sequence, Tuple

import torch

from .precision import compiling
from .threads import run_side_by_side, torch_threads

WAYS = ("sequential", "threads", "streams")
#: Side streams per (device index, slot), made once: a graph recorded with them replays on them.
_STREAMS: Dict[Tuple[int, Hashable], "torch.cuda.Stream"] = {}


def how_to_run(device: torch.device, threads: int = 1, streams: bool = False) -> str:
    """``"threads"`` on the CPU with two threads or more, ``"streams"`` on CUDA where asked, else
    ``"sequential"`` (always inside ``torch.compile``, which traces one stream)."""
    if compiling():
        return "sequential"
    if device.type == "cpu" and threads >= 2:
        return "threads"
    if device.type == "cuda" and streams:
        return "streams"
    return "sequential"


def run_side_by_side_of(
    runs: Sequence[Callable[[torch.Tensor], Any]],
    x: torch.Tensor,
    how: str,
    params: Optional[Sequence[Sequence[torch.Tensor]]] = None,
    context: Optional[Callable[[], ContextManager]] = None,
    one_thread_each: bool = False,
) -> List[Any]:
    """``[run(x) for run in runs]``, run ``how`` (``WAYS``).

    ``params[k]``: the parameters ``runs[k]`` uses, needed for ``"threads"`` where gradients flow.
    ``context``: what each thread enters besides the caller's grad mode (the precision context).
    ``one_thread_each``: one PyTorch thread while the threads run, for callers that own their
    process (pretraining); a pipe's runner leaves the count alone."""
    if how not in WAYS:
        raise ValueError(f"run_side_by_side_of: how must be one of {WAYS}, got {how!r}")
    if how == "sequential" or len(runs) < 2:
        return [run(x) for run in runs]
    if how == "streams":
        return _on_streams(runs, x)
    context = context or nullcontext
    grad = torch.is_grad_enabled()
    wants_grad = grad and (x.requires_grad or any(p.requires_grad for ps in (params or ()) for p in ps))
    if wants_grad:
        if params is None:
            raise ValueError("run_side_by_side_of: gradients on threads need each run's params")
        threads = (lambda: torch_threads(1)) if one_thread_each else nullcontext
        results: List[Any] = []  # what the runs returned (their structure), filled by the forward
        flat = iter(_ThreadedRuns.apply(runs, params, (context, threads, results), x, *[p for ps in params for p in ps]))
        return [_rebuilt(result, flat) for result in results]

    with torch_threads(1) if one_thread_each else nullcontext():
        return run_side_by_side([_task(run, x, grad, context) for run in runs])


def _task(run: Callable, x: torch.Tensor, grad: bool, context: Callable[[], ContextManager]) -> Callable[[], Any]:
    """``run(x)`` as a thread's work, entering grad mode ``grad`` and ``context`` (both per thread)."""

    def work() -> Any:
        with torch.set_grad_enabled(grad), context():
            return run(x)

    return work


def side_stream(device: torch.device, slot: Hashable) -> "torch.cuda.Stream":
    """CUDA ``device``'s side stream ``slot``, kept (a graph replays on its recording's streams)."""
    key = (device.index if device.index is not None else torch.cuda.current_device(), slot)
    if key not in _STREAMS:
        _STREAMS[key] = torch.cuda.Stream(torch.device("cuda", key[0]))
    return _STREAMS[key]


def _on_streams(runs: Sequence[Callable], x: torch.Tensor) -> List[Any]:
    """The first run on the current stream, run k on side stream k, joined back."""
    main = torch.cuda.current_stream(x.device)
    sides = [side_stream(x.device, k) for k in range(1, len(runs))]
    for side in sides:
        side.wait_stream(main)
    results = [runs[0](x)]
    for run, side in zip(runs[1:], sides):
        with torch.cuda.stream(side):
            results.append(run(x))
    capturing = torch.cuda.is_current_stream_capturing()
    for side, result in zip(sides, results[1:]):
        main.wait_stream(side)
        if not capturing:  # eagerly, the allocator must not hand their memory to `side` early
            _used_on(result, main)
    return results


def _used_on(value: Any, stream: "torch.cuda.Stream") -> None:
    if isinstance(value, torch.Tensor):
        if value.is_cuda:
            value.record_stream(stream)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _used_on(item, stream)


def _flat(value: Any) -> List[torch.Tensor]:
    """The tensors of a run's output (a tensor, or lists and tuples of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for item in value for t in _flat(item)]


def _rebuilt(value: Any, flat: Iterator[torch.Tensor]) -> Any:
    """``value``'s structure with its tensors taken from ``flat`` in order."""
    if isinstance(value, torch.Tensor):
        return next(flat)
    return type(value)(_rebuilt(item, flat) for item in value)


class _ThreadedRuns(torch.autograd.Function):
    """Runs from one input, each forward and backward on its own thread, as one autograd node, so
    the caller's backward (and DDP's hooks) see the parameters' gradients as usual.

    forward(runs, params, (context, threads, results), x, *all params): each ``runs[k](x)`` builds
    its graph on a detached copy of ``x``; returns the tensors of the runs' outputs (a tensor, or
    lists and tuples of them: ``results`` gets the outputs themselves, for their structure)."""

    @staticmethod
    def forward(ctx, runs, params, contexts, x, *all_params):
        context, threads, results = contexts
        leaves = [x.detach().requires_grad_(x.requires_grad) for _ in runs]
        with threads():
            outputs = run_side_by_side([_task(run, leaf, True, context) for run, leaf in zip(runs, leaves)])
        results.extend(outputs)
        flat = [_flat(output) for output in outputs]
        ctx.graphs, ctx.threads = list(zip(leaves, flat, params)), threads
        detached = tuple(t.detach() for tensors in flat for t in tensors)
        ctx.mark_non_differentiable(*(d for d, t in zip(detached, sum(flat, [])) if not t.requires_grad))
        return detached

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        def task(leaf, outputs, params, grads):
            inputs = ([leaf] if leaf.requires_grad else []) + list(params)
            wanted = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
            if not wanted:
                return lambda: [None] * len(inputs)
            outs, out_grads = zip(*wanted)
            return lambda: torch.autograd.grad(outs, inputs, out_grads, allow_unused=True)

        graphs, ctx.graphs = ctx.graphs, None
        run_grads, start = [], 0
        for _, outputs, _ in graphs:
            run_grads.append(grads[start : start + len(outputs)])
            start += len(outputs)
        with ctx.threads():
            results = run_side_by_side([task(*graph, g) for graph, g in zip(graphs, run_grads)])
        x_grad = None
        param_grads: List[Optional[torch.Tensor]] = []
        for (leaf, _, _), result in zip(graphs, results):
            if leaf.requires_grad:
                if result[0] is not None:
                    x_grad = result[0] if x_grad is None else x_grad + result[0]
                result = result[1:]
            param_grads += list(result)
        return (None, None, None, x_grad, *param_grads)
