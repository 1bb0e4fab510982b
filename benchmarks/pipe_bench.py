"""``benchmarks pipe``: ``nlp.pipe`` end to end on real text, and where its time goes.

The pipeline is a blank English tokenizer (+ sentencizer, by default) and the ``elmo`` pipe.
Three clocks on the same texts, in one run:

- ``tokenizer``: a fresh tokenizer of the same language alone (a separate pass over the texts;
  fresh, so its cache is as cold as the pipeline's);
- ``bilm forward``: the summed time of every ``BiLM.forward`` call during ``nlp.pipe``, from a
  forward pre-hook and a forward hook on the module (synchronised on GPU);
- ``total``: the wall time of ``nlp.pipe`` over all texts.

What is outside the biLM forward (tokenizing, sentence splitting, character ids, batching,
mixing the layers, setting the extensions) is ``total - bilm forward``; its share of the total is
what the pipe costs on top of the network. A warm-up on other text comes first, so that neither
lazy initialisation nor the pipe's layer cache flatters the timed run.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch
from tqdm import tqdm

from spacy_elmo.bench.measure import Stopwatch, synchronize
from spacy_elmo.bench.system import system_info
from spacy_elmo.bench.text import DEMO_TEXT, default_text_path, text_lines
from spacy_elmo.nn.precision import runs_on

from .pipeline import WEIGHT_KEYS, ModelSource, elmo_pipeline


class ForwardClock:
    """Sums the wall time of every forward call of a module, by hooks that leave it unchanged."""

    def __init__(self, module: torch.nn.Module, device: torch.device) -> None:
        self.device = device
        self.seconds = 0.0
        self.calls = 0
        self._handles = [
            module.register_forward_pre_hook(self._before),
            module.register_forward_hook(self._after),
        ]

    def _before(self, module, args) -> None:
        synchronize(self.device)
        self._start = time.perf_counter()

    def _after(self, module, args, output) -> None:
        synchronize(self.device)
        self.seconds += time.perf_counter() - self._start
        self.calls += 1

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def pipe_texts(text: Optional[Path], max_tokens: int) -> List[str]:
    """Lines of the text, in order, until about ``max_tokens`` whitespace tokens."""
    texts, n = [], 0
    for line in itertools.cycle(text_lines(text)):
        if n >= max_tokens:
            return texts
        texts.append(line)
        n += len(line.split())


def _timed_pipe(nlp, texts: List[str], batch_size: int, bilm: torch.nn.Module, device: torch.device, progress: bool):
    """``(tokens, wall seconds, ForwardClock)`` of one ``nlp.pipe`` over ``texts``."""
    clock = ForwardClock(bilm, device)
    docs = tqdm(nlp.pipe(texts, batch_size=batch_size), total=len(texts), desc="nlp.pipe", unit="doc", disable=not progress)
    try:
        with Stopwatch(device) as wall:
            n_tokens = sum(len(doc) for doc in docs)
    finally:
        clock.remove()
        docs.close()
    return n_tokens, wall.seconds, clock


def run_pipe_bench(
    source: ModelSource,
    text: Optional[Path] = None,
    max_tokens: int = 20000,
    batch_size: int = 64,
    sentencizer: bool = True,
    settings: Optional[Dict[str, Any]] = None,
    threads: Optional[int] = None,
    progress: bool = True,
) -> Dict[str, Any]:
    import spacy

    if threads:
        torch.set_num_threads(threads)
    nlp = elmo_pipeline(source, sentencizer=sentencizer, settings=settings)
    elmo = nlp.get_pipe("elmo")
    bilm = elmo.bilm
    device = next(bilm.parameters()).device
    if not runs_on(elmo.settings.precision, device):
        raise ValueError(
            f"precision {elmo.settings.precision!r} does not run on {device} (it would measure "
            "another mode under its name)"
        )
    texts = pipe_texts(text, max_tokens)
    for _ in nlp.pipe(text_lines(DEMO_TEXT), batch_size=batch_size):  # warm-up on other text
        pass

    tokenizer = spacy.blank(nlp.lang).tokenizer
    start = time.perf_counter()
    n_tokenized = sum(len(doc) for doc in tokenizer.pipe(texts, batch_size=batch_size))
    tokenizer_s = time.perf_counter() - start

    n_tokens, total_s, clock = _timed_pipe(nlp, texts, batch_size, bilm, device, progress)
    assert n_tokens == n_tokenized
    outside_s = total_s - clock.seconds
    cache = getattr(elmo, "cache", None)
    row = {
        "docs": len(texts),
        "tokens": n_tokens,
        "total_s": total_s,
        "tokens_per_s": n_tokens / total_s,
        "bilm_forward_s": clock.seconds,
        "bilm_calls": clock.calls,
        "outside_bilm_s": outside_s,
        "outside_bilm_share": outside_s / total_s,
        "tokenizer_s": tokenizer_s,
        "tokenizer_share": tokenizer_s / total_s,
        "layer_cache_hits": None if cache is None else cache.hits,
        "layer_cache_misses": None if cache is None else cache.misses,
    }
    model_block = {
        key: value for key, value in elmo.settings.model_dump().items() if key not in WEIGHT_KEYS
    }
    return {
        "benchmark": "pipe",
        "system": system_info(),
        "settings": {
            "model": source.to_dict(),
            "text": str(text or default_text_path()),
            "max_tokens": max_tokens,
            "batch_size": batch_size,
            "sentencizer": sentencizer,
            "device": str(device),
            "pipe": {**model_block, **(settings or {})},
            "weights_resolved": elmo.weight_source().describe(),
            "n_parameters": sum(p.numel() for p in bilm.parameters()),
        },
        "rows": [row],
    }


PIPE_COLUMNS = [
    ("docs", "docs", ","),
    ("tokens", "tokens", ","),
    ("tokens_per_s", "tokens/s", ",.0f"),
    ("total_s", "total s", ".2f"),
    ("bilm_forward_s", "biLM forward s", ".2f"),
    ("outside_bilm_share", "outside biLM", ".1%"),
    ("tokenizer_share", "tokenizer", ".1%"),
    ("bilm_calls", "biLM calls", ","),
]
