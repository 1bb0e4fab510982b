"""Backwards-compatible import path: the listener, its mix head and the embedder now live in
``spacy_elmo/layers/`` (one concept per file); see ``spacy_elmo.layers.listener``."""

from .layers.embedder import elmo_embedder
from .layers.listener import ElmoListener
from .layers.mix_head import MixInput, mix_head

__all__ = ["ElmoListener", "MixInput", "elmo_embedder", "mix_head"]
