"""Lexicon indexers: ids from a character lexicon (and a word lexicon), as ELMoForManyLangs reads
text. Lexicon ids are shifted by +1 (0 stays padding). A token row:

    [first, char ids..., last, pad, pad, ...]  (max_characters_per_token ids)  [+ word id]

``first`` is ``<eow>``'s id and ``last`` ``<bow>``'s: ELMoForManyLangs' batching swaps the two, so
its models expect them that way. Unknown characters and words get ``<oov>``, tokens are cut to
``max_characters_per_token - 2`` code points, and text tokens ``<bos>``/``<eos>`` are taken for the
boundary tokens, as ELMoForManyLangs does.
"""

from __future__ import annotations

from typing import Annotated, Any, Dict, Literal, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, Strict

from ..chars import pad_batch
from ..options import BiLMOptions, OptionsError
from ..validation import StrictPositive

BOS, EOS, OOV, PAD, BOW, EOW = "<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"
#: entries ELMoForManyLangs looks up in each lexicon (it fails without them).
REQUIRED_CHARS = (BOS, EOS, OOV, PAD, BOW, EOW)
REQUIRED_WORDS = (OOV, PAD)
#: where a native checkpoint's options.json keeps the lexicons.
LEXICON_KEY = "lexicon"
#: ids per token: the first and last marks and at least one character.
TokenWidth = Annotated[int, Strict(), Field(ge=3)]


class LexiconError(ValueError):
    """A char.dic / word.dic that ELMoForManyLangs could not have used."""


class Lexicon(BaseModel):
    """Entry -> id, and how many embedding rows the ids index (ids lie in [0, size))."""

    model_config = ConfigDict(frozen=True)
    ids: Dict[str, Annotated[int, Strict()]]
    size: StrictPositive

    def check(self, source: str, required: Sequence[str]) -> "Lexicon":
        """What no one key says: the ``required`` entries (ELMoForManyLangs fails without them) are
        there and every id has its row."""
        missing = [entry for entry in required if entry not in self.ids]
        if missing:
            raise LexiconError(f"{source}: missing the special entries {missing}")
        bad = [(entry, i) for entry, i in self.ids.items() if not 0 <= i < self.size]
        if bad:
            raise LexiconError(f"{source}: ids must lie in [0, {self.size}) (one per line), got {bad[:3]}")
        return self


class ManyLangsVocab(BaseModel):
    """Everything an ELMoForManyLangs model needs to index text: its lexicons and token width (a
    native checkpoint's ``lexicon`` section, as ``model_dump`` writes it)."""

    model_config = ConfigDict(frozen=True)
    format: Literal["elmoformanylangs"]
    max_characters_per_token: TokenWidth
    chars: Lexicon
    words: Optional[Lexicon] = None

    def check(self, source: str) -> "ManyLangsVocab":
        self.chars.check(f"{source}.chars", REQUIRED_CHARS)
        if self.words is not None:
            self.words.check(f"{source}.words", REQUIRED_WORDS)
        return self


class IndexerOptions(BaseModel):
    """What an options file keeps beside the biLM's shape to rebuild its indexer: the lexicons of
    an ELMoForManyLangs model (``LEXICON_KEY``), none for the released byte ids."""

    lexicon: Optional[ManyLangsVocab] = None


class LexiconIndexer:
    """ELMoForManyLangs text -> ids (see the module doc); the interface of ``ByteIndexer``."""

    name = "elmoformanylangs"

    def __init__(self, vocab: ManyLangsVocab) -> None:
        self.vocab = vocab
        chars = vocab.chars.ids
        self._max_chars = vocab.max_characters_per_token
        self._first, self._last = chars[EOW] + 1, chars[BOW] + 1
        self._oov, self._pad = chars[OOV] + 1, chars[PAD] + 1
        self._shifted = {c: i + 1 for c, i in chars.items()}
        self.width = self._max_chars + (vocab.words is not None)
        self.n_characters = vocab.chars.size + 1
        self.n_words = 0 if vocab.words is None else vocab.words.size + 1
        self.padding_id = self._pad
        self.bos_ids = self.tokens_to_ids([BOS])[0]
        self.eos_ids = self.tokens_to_ids([EOS])[0]

    def tokens_to_ids(self, tokens: Sequence[str]) -> np.ndarray:
        """(len(tokens), width) int64."""
        tokens = list(tokens)  # cut in place below: the word ids are those of the cut tokens
        ids = np.full((len(tokens), self.width), self._pad, dtype=np.int64)
        keep = self._max_chars - 2
        get, oov = self._shifted.get, self._oov
        for row, token in enumerate(tokens):
            if not isinstance(token, str):
                raise TypeError(f"token {row} is a {type(token).__name__}, expected str: {token!r}")
            if token in (BOS, EOS):
                chars = [self._shifted[token]]
            else:
                token = tokens[row] = token[:keep]
                chars = [get(c, oov) for c in token]
            ids[row, 0] = self._first
            ids[row, 1 : len(chars) + 1] = chars
            ids[row, len(chars) + 1] = self._last
        words = self.vocab.words
        if words is not None:
            word_oov = words.ids[OOV]
            ids[:, -1] = [words.ids.get(token, word_oov) + 1 for token in tokens]
        return ids

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        return pad_batch(sentences, self.tokens_to_ids, self.width)

    def check_options(self, options: BiLMOptions, source: str) -> None:
        """The options' character sizes and word embedding must be the lexicons'."""
        cnn, vocab = options.char_cnn, self.vocab
        where = f"{source}: char_cnn"
        expected = {"n_characters": self.n_characters, "max_characters_per_token": vocab.max_characters_per_token}
        for key, value in expected.items():
            if getattr(cnn, key) != value:
                raise OptionsError(f"{where}.{key} must be {value} (from the lexicon), got {getattr(cnn, key)!r}")
        if vocab.words is None and cnn.word_dim:
            raise OptionsError(f"{where}.word_dim is {cnn.word_dim!r} but the lexicon has no words")
        if vocab.words is not None and not cnn.word_dim:
            raise OptionsError(f"{where}.word_dim must be an integer >= 1 (the lexicon has words), got {cnn.word_dim!r}")

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, LexiconIndexer) and other.vocab == self.vocab

    def __hash__(self) -> int:
        return hash(self.name)
