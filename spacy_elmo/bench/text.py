"""Real text for the benchmarks: by default the WikiText-2 slice shipped with the package.

Sentences of real text have varied lengths, so batches carry the padding that real batches do
(a benchmark on equal-length rows would flatter any path that wastes work on padding).

Without ``--text`` every bench reads ``DEFAULT_TEXT``, package data, so that a benchmark measures
the same text wherever the package runs (a source checkout or an installed wheel): the first 238
lines (79 KB, about 15,000 tokens, whole lines) of WikiText-2's validation set (Merity et al.
2016, "Pointer Sentinel Mixture Models"; English Wikipedia text, tokenized, rare words as
``<unk>``), licensed CC BY-SA 3.0 like Wikipedia: see ``DEFAULT_TEXT_NOTICE`` beside it. Benches
that need more tokens cycle through it; give the whole corpus with ``--text`` for figures on
more varied text.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

from ..sentences import split_sentences

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
#: The benchmarks' default text (see the module docstring), and its attribution and licence.
DEFAULT_TEXT = DATA_DIR / "wikitext2_valid_head.txt"
DEFAULT_TEXT_NOTICE = DATA_DIR / "wikitext2_valid_head.NOTICE.txt"
#: Other text, for warm-ups that must not touch the timed text.
DEMO_TEXT = DATA_DIR / "demo_sentences.txt"


def default_text_path() -> Path:
    """The text a bench reads without ``--text``: ``DEFAULT_TEXT``, shipped with the package."""
    return DEFAULT_TEXT


def text_lines(path: Optional[Path] = None) -> List[str]:
    """Non-empty lines of already tokenized text, WikiText headings (`` = Title = ``) left out."""
    path = Path(path) if path is not None else default_text_path()
    if not path.is_file():
        raise FileNotFoundError(f"benchmark text not found: {path}")
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not (line.startswith("= ") and line.endswith(" =")):
            lines.append(line)
    if not lines:
        raise ValueError(f"{path}: no text lines to benchmark on")
    return lines


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
