"""``benchmarks lstm-training``: one LSTM layer's forward and backward on the training loop
(``spacy_elmo.nn.lstm_training``) against autograd through the step loop
(``lstm_kernels.packed_loop``), the same layer and rows, alternating in one process. The layer is
the first of a named shape (``shapes.py``), with its clipping: input and projection width
``projection_dim``, cell width ``dim``.

Rows of random lengths in ``lengths`` (sorted, packed as sentence batches are); ``rows`` equal to
1 or lengths of one value give windows. Each round times both kernels, in an order that
alternates; the medians count. The layer's matrix products are counted too (3 forward, 6
backward), and each kernel's rate over them, GFLOP/s: how far it is from the machine's products.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Tuple

import torch

from spacy_elmo.bench.system import system_info
from spacy_elmo.nn import lstm_kernels
from spacy_elmo.nn.lstm import ClippedLSTM
from spacy_elmo.nn.lstm_training import packed_training_loop
from spacy_elmo.nn.threads import torch_threads

from .shapes import shape_options


def run_lstm_training_bench(
    shape: str = "bundled",
    rows: int = 48,
    lengths: Tuple[int, int] = (40, 53),
    threads: int = 1,
    rounds: int = 12,
    seed: int = 0,
) -> Dict[str, Any]:
    """Forward and backward milliseconds of each kernel per round, their medians and ratios
    (step loop / training loop: above 1, the training loop is faster)."""
    lstm = shape_options(shape).lstm
    input_size = projection = lstm.projection_dim
    hidden = lstm.dim
    generator = torch.Generator().manual_seed(seed)
    layer_lengths = sorted(torch.randint(lengths[0], lengths[1] + 1, (rows,), generator=generator).tolist(), reverse=True)
    batch_sizes = [sum(1 for n in layer_lengths if n > t) for t in range(layer_lengths[0])]
    torch.manual_seed(seed)
    layer = ClippedLSTM(input_size, hidden, projection, lstm.cell_clip, lstm.proj_clip)
    x = torch.randn(sum(batch_sizes), input_size, generator=generator, requires_grad=True)

    def training_loop() -> torch.Tensor:
        return packed_training_loop(layer, x, batch_sizes, None)[0]

    def step_loop() -> torch.Tensor:
        return lstm_kernels.packed_loop(layer, lstm_kernels.input_gates(layer, x), batch_sizes, None)[0]

    kernels: Dict[str, Callable[[], torch.Tensor]] = {"training loop": training_loop, "step loop": step_loop}
    times: Dict[str, List[Tuple[float, float]]] = {name: [] for name in kernels}
    with torch_threads(threads):
        for round_ in range(rounds + 1):  # the first round warms up, untimed
            order = list(kernels) if round_ % 2 == 0 else list(kernels)[::-1]
            for name in order:
                layer.zero_grad(set_to_none=True)
                x.grad = None
                start = time.perf_counter()
                output = kernels[name]()
                middle = time.perf_counter()
                output.sum().backward()
                end = time.perf_counter()
                if round_:
                    times[name].append((1000 * (middle - start), 1000 * (end - middle)))
    medians = {
        name: {"forward_ms": statistics.median(f for f, _ in runs), "backward_ms": statistics.median(b for _, b in runs)}
        for name, runs in times.items()
    }
    tokens = sum(batch_sizes)
    forward_gflop = 2 * tokens * (4 * hidden * input_size + 4 * hidden * projection + hidden * projection) / 1e9
    gflop = {"forward_ms": forward_gflop, "backward_ms": 2 * forward_gflop}  # a product's two gradients
    return {
        "benchmark": "lstm-training",
        "shape": shape,
        "sizes": {"input": input_size, "hidden": hidden, "projection": projection},
        "rows": rows,
        "tokens": tokens,
        "steps": len(batch_sizes),
        "clip": {"cell": lstm.cell_clip, "projection": lstm.proj_clip},
        "threads": threads,
        "rounds": rounds,
        "runs_ms": times,
        "median_ms": medians,
        "step_loop_over_training_loop": {
            part: medians["step loop"][part] / medians["training loop"][part] for part in ("forward_ms", "backward_ms")
        },
        "products_gflop": {"forward": gflop["forward_ms"], "backward": gflop["backward_ms"]},
        "products_gflop_per_s": {
            name: {part: gflop[part] / (ms / 1000) for part, ms in parts.items()} for name, parts in medians.items()
        },
        "system": system_info(),
    }
