"""Token indexers: how a biLM turns tokenized sentences into the integer ids its token encoder reads.

The biLM carries its indexer (``BiLM.indexer``), and callers ask the biLM for ids
(``bilm.batch_to_ids``) instead of assuming one mapping: the released ELMo models read UTF-8 bytes
(``ByteIndexer``), ELMoForManyLangs models read their own character lexicon and word lexicon
(``spacy_elmo.manylangs.LexiconIndexer``). Every indexer keeps the same conventions, so the biLM
needs nothing else: a token is one row of ``width`` ids, id 0 is never a real id, and an all-zero
row marks a padded position in a batch.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .chars import (
    BOS_CHAR_IDS,
    EOS_CHAR_IDS,
    MAX_CHARS_PER_TOKEN,
    N_CHARACTERS,
    PADDING,
    pad_batch,
    tokens_to_ids,
)


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

    def tokens_to_ids(self, tokens: Sequence[str]) -> np.ndarray:
        return tokens_to_ids(tokens)

    def batch_to_ids(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        return pad_batch(sentences, self.tokens_to_ids, self.width)
