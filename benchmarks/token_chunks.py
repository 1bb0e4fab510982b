"""``benchmarks token-chunks``: what the batch-invariant int8 token layer costs.

With int8 on the CPU the runner runs the character convolutions in fixed-shape chunks
(``CharacterEncoder(..., chunked=True)``), so that a sentence's vectors are the same alone and in
any batch; this measures the biLM that way ("chunks", what the package runs) against the same
biLM convolving the batch's tokens at once ("at once", the way before), in one process, the two
alternating pass by pass (A B B A ...), so that a drift in the machine's load favours neither.
Each cell (batch size, biLM threads; PyTorch on one op thread, as the commands run it) reports
the median pass of each and their ratio.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Dict, List, Sequence

import torch

from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import text_lines
from spacy_elmo.nn.runner import BiLMRunner
from spacy_elmo.sources import load_bilm

from .text import sentence_batches

COLUMNS = [
    ("precision", "precision", ""),
    ("batch_size", "batch", ""),
    ("threads", "threads", ""),
    ("tokens_per_s_chunks", "chunks tok/s", ",.0f"),
    ("tokens_per_s_at_once", "at once tok/s", ",.0f"),
    ("chunks_over_at_once", "chunks / at once", ".3f"),
]


def _at_once(runner: BiLMRunner):
    """The runner's own token encoding (its split over threads), the encoder told to convolve
    the batch at once whatever the runner asks."""
    encoder = runner.bilm.token_encoder
    forward = type(encoder).forward

    def encode(char_ids: torch.Tensor) -> torch.Tensor:
        encoder.forward = lambda ids, chunked=False: forward(encoder, ids, False)
        try:
            return type(runner)._encode_tokens(runner, char_ids)
        finally:
            del encoder.forward

    return encode


def run_token_chunks_bench(
    weights: str,
    description: str,
    batch_sizes: Sequence[int] = (1, 32),
    threads: Sequence[int] = (1, 2),
    sentences: int = 64,
    rounds: int = 5,
    seq_len: int = 25,
) -> Dict[str, Any]:
    torch.set_num_threads(1)
    runner = BiLMRunner(load_bilm(weights), "int8")
    lines = text_lines()
    rows: List[Dict[str, Any]] = []
    for batch_size in batch_sizes:
        batches = sentence_batches(lines, batch_size, seq_len, max(1, sentences // batch_size))
        inputs = [torch.from_numpy(runner.bilm.batch_to_ids(batch)) for batch in batches]
        tokens = sum(len(s) for batch in batches for s in batch)
        for n_threads in threads:
            runner.threads = n_threads
            ways = {"chunks": runner._encode_tokens, "at_once": _at_once(runner)}
            seconds: Dict[str, List[float]] = {way: [] for way in ways}
            for round_ in range(rounds + 1):  # the first round warms up, untimed
                for way in list(ways) if round_ % 2 == 0 else list(ways)[::-1]:
                    runner._encode_tokens = ways[way]
                    start = time.perf_counter()
                    with torch.no_grad():
                        for ids in inputs:
                            runner(ids)
                    if round_:
                        seconds[way].append(time.perf_counter() - start)
            del runner._encode_tokens
            medians = {way: statistics.median(values) for way, values in seconds.items()}
            rows.append({
                "precision": "int8",
                "batch_size": batch_size,
                "threads": n_threads,
                "tokens": tokens,
                "seconds": seconds,
                "tokens_per_s_chunks": tokens / medians["chunks"],
                "tokens_per_s_at_once": tokens / medians["at_once"],
                "chunks_over_at_once": medians["at_once"] / medians["chunks"],
            })
    return {"benchmark": "token-chunks", "model": description, "rounds": rounds, "rows": rows, "system": system_info()}
