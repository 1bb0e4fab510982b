"""Real text cut for the benchmarks: sentences, batches of them, a token stream, a vocabulary.

The text itself is the package's (``spacy_elmo.bench.text``: the WikiText-2 slice shipped with
it, or ``--text``); sentences of real text have varied lengths, so batches carry the padding that
real batches do (a benchmark on equal-length rows would flatter any path that wastes work on
padding).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator, List, Sequence

from spacy_elmo.sentences import split_sentences


def sentences(lines: Sequence[str], max_length: int) -> Iterator[List[str]]:
    """Whitespace tokens of each line cut into sentences of at most ``max_length`` tokens
    (``spacy_elmo.sentences.split_sentences``, as pretraining cuts its text)."""
    for line in lines:
        yield from split_sentences(line.split(), max_length)


def sentence_batches(
    lines: Sequence[str], batch_size: int, max_length: int, n_batches: int
) -> List[List[List[str]]]:
    """``n_batches`` batches of ``batch_size`` consecutive sentences (text order, not sorted by
    length, so each batch pads to its longest sentence). Cycles through the text if it is short."""
    pool = list(sentences(lines, max_length))
    needed = batch_size * n_batches
    while len(pool) < needed:
        pool += pool
    return [pool[i * batch_size : (i + 1) * batch_size] for i in range(n_batches)]


def token_stream(lines: Sequence[str], n_tokens: int) -> List[str]:
    """The first ``n_tokens`` whitespace tokens of the text (repeated if it is shorter)."""
    tokens = [t for line in lines for t in line.split()]
    if not tokens:
        raise ValueError("no tokens in the benchmark text")
    while len(tokens) < n_tokens:
        tokens += tokens
    return tokens[:n_tokens]


def words_by_frequency(lines: Sequence[str]) -> List[str]:
    """Distinct tokens, most frequent first (ties alphabetically)."""
    counts = Counter(t for line in lines for t in line.split())
    return sorted(counts, key=lambda w: (-counts[w], w))
