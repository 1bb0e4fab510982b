"""HIT-SCIR's ELMoForManyLangs models (44 languages) as this package's ``BiLM``.

``load_manylangs_bilm(DIR)`` reads a downloaded model directory; the biLM it returns indexes text
with the model's own lexicons (``bilm.batch_to_ids``) and saves to a native checkpoint with
``save_bilm`` (the lexicons travel in its ``options.json``), which ``load_bilm`` reads without the
original files.
"""

from .lexicon import LexiconError, LexiconIndexer, ManyLangsVocab
from .model_dir import ManyLangsFormatError, is_manylangs_dir, load_manylangs_bilm

__all__ = [
    "LexiconError",
    "LexiconIndexer",
    "ManyLangsFormatError",
    "ManyLangsVocab",
    "is_manylangs_dir",
    "load_manylangs_bilm",
]
