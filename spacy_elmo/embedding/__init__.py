"""``python -m spacy_elmo embed``: ELMo vectors of a corpus to HDF5, in one process or sharded over
many under ``torchrun``, resumable after a crash.

One module per job: ``items`` (the input as a stream of numbered sentences), ``keys`` (names for
``--use-sentence-keys``), ``manifest`` (what makes the output, for ``--resume``), ``chunks`` (the
parts folder and its chunk files), ``job`` (rank 0's verdict at the start), ``worker`` (one rank's
chunks), ``progress`` (rank 0's bar), and ``merge`` (the chunks into one file); the
command and the ranks' handshake are ``spacy_elmo.cli.embed``.
"""

from .job import EMBED_LAYERS, EmbedOptions

__all__ = ["EMBED_LAYERS", "EmbedOptions"]
