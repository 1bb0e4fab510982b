"""Token indexers: how a biLM turns tokenized sentences into the integer ids its token encoder reads.

The biLM carries its indexer (``BiLM.indexer``), and callers ask the biLM for ids
(``bilm.batch_to_ids``) instead of assuming one mapping: the released ELMo models read UTF-8 bytes
(``ByteIndexer``), ELMoForManyLangs models read their own character and word lexicons
(``LexiconIndexer``). Every indexer keeps the same conventions, so the biLM needs nothing else: a
token is one row of ``width`` ids, id 0 is never a real id, and an all-zero row marks a padded
position in a batch.

A weight format's reader says which indexer its model needs; a model saved in this package's own
format stores it beside its options (``indexer_to_json`` / ``indexer_from_json``).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Union

from .byte_ids import ByteIndexer
from .lexicon import LEXICON_KEY, LexiconError, LexiconIndexer, ManyLangsVocab

TokenIndexer = Union[ByteIndexer, LexiconIndexer]


def indexer_to_json(indexer: TokenIndexer) -> Dict[str, Any]:
    """What an options file needs beside the biLM's shape to rebuild ``indexer``: nothing for the
    released byte mapping (the default), a ``lexicon`` section for a lexicon indexer."""
    if isinstance(indexer, LexiconIndexer):
        return {LEXICON_KEY: indexer.vocab.to_dict()}
    return {}


def indexer_from_json(data: Mapping[str, Any], source: str) -> TokenIndexer:
    """The indexer an options file describes (see ``indexer_to_json``); errors name ``source``."""
    lexicon = data.get(LEXICON_KEY)
    if lexicon is None:
        return ByteIndexer()
    return LexiconIndexer(ManyLangsVocab.from_dict(lexicon, source))


__all__ = [
    "ByteIndexer",
    "LexiconError",
    "LexiconIndexer",
    "ManyLangsVocab",
    "TokenIndexer",
    "indexer_from_json",
    "indexer_to_json",
]
