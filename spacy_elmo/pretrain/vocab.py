"""The softmax vocabulary: which words the language models predict.

Saved as ``vocab.txt``, one word per line, in bilm-tf's order: ``<S>``, ``</S>``, ``<UNK>``, then
the corpus words by decreasing frequency (the log-uniform sampler relies on that order).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Union

from ..chars import BOS_TOKEN, EOS_TOKEN
from ..files import replacing

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
#: How WikiText and the Penn Treebank write a word they replaced: kept out of a vocabulary built
#: from text, so that it is read as <UNK> and the softmax learns the unknown class that every
#: other text's rare words fall into (a word of its own, it leaves <UNK> with no probability).
CORPUS_UNKNOWN = "<unk>"
_NOT_WORDS = frozenset((*SPECIAL_TOKENS, CORPUS_UNKNOWN))


class VocabError(ValueError):
    """A vocabulary file that cannot be used."""


class Vocab:
    def __init__(self, words: Sequence[str]) -> None:
        if tuple(words[:3]) != SPECIAL_TOKENS:
            raise VocabError(
                f"a vocabulary must start with {SPECIAL_TOKENS}, got {tuple(words[:3])}"
            )
        self.words: List[str] = list(words)
        self.index: Dict[str, int] = {}
        for i, word in enumerate(self.words):
            if word in self.index:
                raise VocabError(
                    f"duplicate word {word!r} at lines {self.index[word] + 1} and {i + 1}"
                )
            self.index[word] = i
        self.bos, self.eos, self.unk = 0, 1, 2

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, tokens: Iterable[str]) -> List[int]:
        """Ids of ``[<S>, *tokens, </S>]``; unknown words map to ``<UNK>``."""
        return [self.bos, *self.ids(tokens), self.eos]

    def ids(self, tokens: Iterable[str]) -> List[int]:
        """Ids of ``tokens`` as they are (boundary tokens among them included)."""
        get, unk = self.index.get, self.unk
        return [get(t, unk) for t in tokens]

    @classmethod
    def from_counts(cls, counts: Counter, max_size: int, min_count: int = 1) -> "Vocab":
        """The ``max_size`` most frequent words seen at least ``min_count`` times (specials
        included in ``max_size``; a corpus's ``<unk>`` is ``<UNK>``). Ties are broken
        alphabetically so the result is deterministic."""
        if max_size <= len(SPECIAL_TOKENS):
            raise VocabError(f"vocab size must be > {len(SPECIAL_TOKENS)}, got {max_size}")
        ranked = sorted(
            (w for w, c in counts.items() if c >= min_count and w not in _NOT_WORDS),
            key=lambda w: (-counts[w], w),
        )
        return cls([*SPECIAL_TOKENS, *ranked[: max_size - len(SPECIAL_TOKENS)]])

    def save(self, path: Union[str, Path]) -> None:
        with replacing(path) as temporary:
            temporary.write_text("\n".join(self.words) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Union[str, Path]) -> "Vocab":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"vocabulary file not found: {path}")
        words = path.read_text(encoding="utf-8-sig").split("\n")
        if words and words[-1] == "":
            words.pop()
        try:
            return cls(words)
        except VocabError as err:
            raise VocabError(f"{path}: {err}") from err
