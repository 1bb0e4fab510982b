"""Sentences of tokenized text: the one splitter, so that pretraining and benchmark text are cut as
the biLM reads sentences at inference.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Sequence

#: Tokens that end a sentence: Latin, CJK (full-width), Arabic and Urdu, Devanagari, Ethiopic.
SENTENCE_END = frozenset({".", "!", "?", "。", "！", "？", "．", "؟", "۔", "।", "॥", "።", "‼", "⁇", "⁈", "⁉"})


def split_sentences(tokens: Sequence[str], max_length: Optional[int] = None) -> List[List[str]]:
    """Cut after sentence-final punctuation runs, then into windows of ``max_length``."""
    sentences, start = [], 0
    for i, token in enumerate(tokens):
        if token in SENTENCE_END and i + 1 < len(tokens) and tokens[i + 1] not in SENTENCE_END:
            sentences.append(list(tokens[start : i + 1]))
            start = i + 1
    if start < len(tokens):
        sentences.append(list(tokens[start:]))
    if max_length is None:
        return sentences
    return [window for sentence in sentences for window in windows(sentence, max_length)]


def windows(tokens: Sequence[str], size: int) -> Iterator[List[str]]:
    """Consecutive pieces of ``tokens`` of ``size`` tokens (the last may be shorter)."""
    for start in range(0, len(tokens), size):
        yield list(tokens[start : start + size])
