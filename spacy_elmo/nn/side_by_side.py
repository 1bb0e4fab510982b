"""The one engine that runs computations which share nothing side by side: the biLM's two LSTM
directions (and, at inference on the CPU, shards of the batch times the directions).

``run_side_by_side_of(runs, x, how, ...)`` returns ``[run(x) for run in runs]``, computed

- ``"sequential"``: one after the other (what every other way computes);
- ``"threads"`` (the CPU): each run on a thread of its own (``nn/threads.py``), with one
  PyTorch thread each where the caller owns its process (``one_thread_each``: PyTorch's threads
  would split every small op of the per-step loop and meet at each); where gradients are wanted the runs form one autograd node,
  whose backward runs each run's backward on its thread too (``_ThreadedRuns``); each thread
  enters the caller's grad mode and ``context()`` (the precision context: autocast and the int8
  switch are per thread);
- ``"streams"`` (CUDA): the first run on the current stream, each other on a side stream of its
  own, forked from and joined back to the current one, so that the GPU runs their small kernels
  concurrently; inside a CUDA graph's recording the streams become the graph's parallel
  branches. Autograd runs each backward op on its forward op's stream, so the backward runs side
  by side too. The host issues the same ops in the same order as ``"sequential"``: the same
  numbers (dropout's draws included).

``how_to_run(device, threads)`` picks the way for a device.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Dict, Hashable, List, Optional, Sequence, Tuple

import torch

from .precision import compiling
from .threads import run_side_by_side, torch_threads

WAYS = ("sequential", "threads", "streams")
#: Side streams per (device index, slot), made once: a graph recorded with them replays on them.
_STREAMS: Dict[Tuple[int, Hashable], "torch.cuda.Stream"] = {}


def how_to_run(device: torch.device, threads: int = 1, streams: bool = False) -> str:
    """``"threads"`` on the CPU with two threads or more, ``"streams"`` on CUDA where asked,
    else ``"sequential"``; always sequential inside ``torch.compile`` (which traces one
    stream)."""
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
    """``[run(x) for run in runs]``, run ``how`` (``WAYS``; see the module docstring).

    ``params[k]``: the parameters ``runs[k]`` uses, needed for ``"threads"`` where gradients
    flow (the runs' outputs are then tensors). ``context``: what each thread enters besides the
    caller's grad mode (default: nothing). ``one_thread_each``: PyTorch's thread count is 1
    while the threads run (``torch_threads``), for callers that own their process (pretraining);
    a pipe's runner leaves the process's count alone."""
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
        return list(_ThreadedRuns.apply(runs, params, (context, threads), x, *[p for ps in params for p in ps]))

    def task(run: Callable) -> Callable[[], Any]:
        def work() -> Any:
            with torch.set_grad_enabled(grad), context():
                return run(x)

        return work

    with torch_threads(1) if one_thread_each else nullcontext():
        return run_side_by_side([task(run) for run in runs])


def side_stream(device: torch.device, slot: Hashable) -> "torch.cuda.Stream":
    """The side stream ``slot`` of CUDA ``device``, made on first use and kept (a recorded graph
    replays on the streams it was recorded with)."""
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


class _ThreadedRuns(torch.autograd.Function):
    """Runs from the same input, each forward and backward on a thread of its own with one
    PyTorch thread, as one autograd node: the caller's backward (and DDP's gradient hooks) see
    the node's parameters' gradients as usual.

    forward(runs, params, (context, threads), x, *all params): ``runs[k](x)`` builds its own
    graph on a detached copy of ``x`` in the caller's grad mode and ``context()``, forward and
    backward inside ``threads()`` (the thread count); ``params[k]``: the parameters ``runs[k]``
    uses. Returns the runs' outputs."""

    @staticmethod
    def forward(ctx, runs, params, contexts, x, *all_params):
        context, threads = contexts
        leaves = [x.detach().requires_grad_(x.requires_grad) for _ in runs]

        def task(run, leaf):
            def work():
                with torch.enable_grad(), context():
                    return run(leaf)

            return work

        with threads():
            outputs = run_side_by_side([task(run, leaf) for run, leaf in zip(runs, leaves)])
        ctx.graphs, ctx.threads = list(zip(leaves, outputs, params)), threads
        return tuple(output.detach() for output in outputs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        def task(leaf, output, params, grad):
            inputs = ([leaf] if leaf.requires_grad else []) + list(params)
            return lambda: torch.autograd.grad(output, inputs, grad, allow_unused=True)

        graphs, ctx.graphs = ctx.graphs, None
        with ctx.threads():
            results = run_side_by_side([task(*graph, g) for graph, g in zip(graphs, grads)])
        x_grad = None
        param_grads: List[Optional[torch.Tensor]] = []
        for (leaf, _, _), result in zip(graphs, results):
            if leaf.requires_grad:
                x_grad = result[0] if x_grad is None else x_grad + result[0]
                result = result[1:]
            param_grads += list(result)
        return (None, None, None, x_grad, *param_grads)
