"""Token indexers: how a biLM turns tokenized sentences into the ids its token encoder reads.

The biLM carries its indexer (``bilm.batch_to_ids``): UTF-8 bytes for the released models
(``ByteIndexer``), lexicons for ELMoForManyLangs (``LexiconIndexer``). All share the conventions: a
token is one row of ``width`` ids, 0 is never a real id, an all-zero row is padding.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Union

from ..validation import validated
from .byte_ids import ByteIndexer
from .lexicon import LEXICON_KEY, IndexerOptions, LexiconError, LexiconIndexer, ManyLangsVocab

TokenIndexer = Union[ByteIndexer, LexiconIndexer]


def indexer_to_json(indexer: TokenIndexer) -> Dict[str, Any]:
    """What an options file needs beside the biLM's shape to rebuild ``indexer``: nothing for the
    released byte mapping (the default), a ``lexicon`` section for a lexicon indexer."""
    if isinstance(indexer, LexiconIndexer):
        return {LEXICON_KEY: indexer.vocab.model_dump()}
    return {}


def indexer_from_json(data: Mapping[str, Any], source: str) -> TokenIndexer:
    """The indexer an options file describes (see ``indexer_to_json``); errors name ``source``."""
    lexicon = validated(IndexerOptions, data, f"{source}: ", LexiconError).lexicon
    return ByteIndexer() if lexicon is None else LexiconIndexer(lexicon.check(f"{source}: {LEXICON_KEY}"))


__all__ = [
    "ByteIndexer",
    "LexiconError",
    "LexiconIndexer",
    "ManyLangsVocab",
    "TokenIndexer",
    "indexer_from_json",
    "indexer_to_json",
]
