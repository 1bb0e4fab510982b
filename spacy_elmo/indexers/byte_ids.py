"""The released ELMo mapping as an indexer: 50 UTF-8 byte ids per token (``spacy_elmo.chars``)."""

from __future__ import annotations

from typing import Any

from ..chars import (
    BOS_CHAR_IDS,
    EOS_CHAR_IDS,
    MAX_CHARS_PER_TOKEN,
    N_CHARACTERS,
    PADDING,
    batch_to_ids,
    tokens_to_ids,
)
from ..options import BiLMOptions, OptionsError


class ByteIndexer:
    """The released ELMo mapping (``spacy_elmo.chars``): 50 UTF-8 byte ids per token."""

    name = "bytes"
    #: ids per token row.
    width = MAX_CHARS_PER_TOKEN
    #: character-embedding rows (ids lie in [0, n_characters)).
    n_characters = N_CHARACTERS
    #: word-embedding rows; 0: no word ids.
    n_words = 0
    #: the id that fills a token row after its last character.
    padding_id = PADDING + 1
    bos_ids = BOS_CHAR_IDS
    eos_ids = EOS_CHAR_IDS

    #: The released mapping's own functions (``spacy_elmo.chars``).
    tokens_to_ids = staticmethod(tokens_to_ids)
    batch_to_ids = staticmethod(batch_to_ids)

    def check_options(self, options: BiLMOptions, source: str) -> None:
        """Options that a byte-id model must have; the error names ``source`` and the key."""
        cnn = options.char_cnn
        where = f"{source}: char_cnn"
        if cnn.n_characters not in (N_CHARACTERS - 1, N_CHARACTERS):
            raise OptionsError(
                f"{where}.n_characters must be 261 (training) or 262 (inference), got {cnn.n_characters!r}"
            )
        if cnn.max_characters_per_token != MAX_CHARS_PER_TOKEN:
            raise OptionsError(
                f"{where}.max_characters_per_token must be {MAX_CHARS_PER_TOKEN} (the released "
                f"character mapping), got {cnn.max_characters_per_token!r}"
            )
        if cnn.word_dim:
            raise OptionsError(
                f"{where}.word_dim is {cnn.word_dim}, but the released character mapping has no "
                "word ids (a word embedding needs a 'lexicon' section)"
            )

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ByteIndexer)

    def __hash__(self) -> int:
        return hash(self.name)
