"""``python -m spacy_elmo embed``'s jobs: ELMo vectors of a corpus to HDF5, in one process or
sharded under ``torchrun``, resumable; one module per job (docs/guide/embedding.md).
The command itself is ``spacy_elmo.cli.embed``.
"""

from .job import EMBED_LAYERS, EmbedOptions

__all__ = ["EMBED_LAYERS", "EmbedOptions"]
