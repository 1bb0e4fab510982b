"""The sense data: sentences of ambiguous English words, each labelled with the word's sense.

``data/senses.jsonl``: one sentence a line, ``word``, ``sense``, ``text`` and optionally ``pos`` (a
UD tag); the target is the one token of ``text`` equal to ``word``. ``senses_heldout.jsonl`` holds
other words, written after the default mix and the bundled model were chosen on the first.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import srsly

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "senses.jsonl"
HELDOUT_FILE = DATA_FILE.with_name("senses_heldout.jsonl")

#: Cosines within this distance of the best one count as tied (float32 noise of equal vectors).
TIE_TOLERANCE = 1e-5

#: Universal Dependencies part-of-speech tags, what ``pos`` may hold.
UPOS_TAGS = frozenset(
    "ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split()
)


@dataclass(frozen=True)
class SenseSentence:
    """One benchmark sentence: ``word`` occurs in ``tokens`` exactly once, at ``target``."""

    word: str
    sense: str
    text: str
    tokens: Tuple[str, ...]
    target: int
    pos: Optional[str] = None


def read_senses(path: Path = DATA_FILE, tokenizer: Any = None) -> List[SenseSentence]:
    """The sentences of ``path``, tokenized with ``tokenizer`` (default ``spacy.blank("en")``'s).
    Raises ValueError naming the line for a missing field, a word that is not one token exactly once
    or a bad ``pos``, and for a word with fewer than 2 senses or a sense with fewer than 2
    sentences."""
    if tokenizer is None:
        import spacy

        tokenizer = spacy.blank("en").tokenizer
    path = Path(path)
    sentences = []
    for number, record in enumerate(srsly.read_jsonl(path), start=1):
        missing = [key for key in ("word", "sense", "text") if not record.get(key)]
        if missing:
            raise ValueError(
                f"{path}, line {number}: missing {missing}, expected word, sense, text"
            )
        tokens = tuple(token.text for token in tokenizer(record["text"]))
        hits = [i for i, token in enumerate(tokens) if token == record["word"]]
        if len(hits) != 1:
            raise ValueError(
                f"{path}, line {number}: {record['word']!r} is {len(hits)} tokens of "
                f"{list(tokens)}, expected exactly 1"
            )
        pos = record.get("pos")
        if pos is not None and pos not in UPOS_TAGS:
            raise ValueError(
                f"{path}, line {number}: pos {pos!r} is not a Universal Dependencies tag "
                f"({' '.join(sorted(UPOS_TAGS))})"
            )
        sentences.append(
            SenseSentence(
                record["word"], record["sense"], record["text"], tokens, hits[0], pos
            )
        )
    tagged = sum(s.pos is not None for s in sentences)
    if 0 < tagged < len(sentences):
        raise ValueError(
            f"{path}: {tagged} of {len(sentences)} lines give pos: give it on every line or none"
        )
    _check_design(path, sentences)
    return sentences


def _check_design(path: Path, sentences: Sequence[SenseSentence]) -> None:
    counts: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s in sentences:
        counts[s.word][s.sense] += 1
    if not counts:
        raise ValueError(f"{path}: no sentences")
    for word, senses in counts.items():
        if len(senses) < 2 or min(senses.values()) < 2:
            raise ValueError(
                f"{path}: {word!r} has senses {dict(senses)}, expected >= 2 senses with >= 2 "
                "sentences each"
            )


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (zero rows left at 0), in float64: cosines become dot products."""
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def has_one_tag(words: Sequence[str], pos: Sequence[str]) -> Dict[str, bool]:
    """word -> whether all its occurrences share one ``pos`` (only meaning tells them apart)."""
    tags: Dict[str, set] = defaultdict(set)
    for word, tag in zip(words, pos):
        tags[word].add(tag)
    return {word: len(word_tags) == 1 for word, word_tags in tags.items()}
