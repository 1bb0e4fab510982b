"""``ElmoEmbedder``: a listener's head on its own copy of the biLM, what
``nlp.replace_listeners`` leaves where an ``ElmoListener`` was."""

from __future__ import annotations

from typing import List

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d

from .bilm_model import get_runner, op_threads
from .doc_layers import doc_layers
from .mix_head import size_head


def elmo_embedder(elmo: Model, head: Model) -> Model[List[Doc], List[Floats2d]]:
    """``Model[List[Doc], List[Floats2d]]``: its own biLM (``elmo``) feeding a ``MixHead``."""
    return Model(
        "elmo-embedder",
        _embedder_forward,
        init=_embedder_init,
        dims={"nO": head.get_dim("nO")},
        layers=[elmo, head],
    )


def _embedder_init(model: Model, X=None, Y=None) -> Model:
    elmo, head = model.layers
    elmo.initialize()  # its weights read, unless it has them (a copy of the pipe's)
    bilm = get_runner(elmo).bilm
    size_head(head, bilm.n_output_layers, bilm.output_dim)
    if not head.has_param("s"):
        head.initialize(X=(X, None) if X is not None else None)
    return model


def _embedder_forward(model: Model, docs: List[Doc], is_train: bool):
    elmo, head = model.layers
    # The copied biLM stays frozen, as in the pipeline it came from.
    with op_threads(elmo):
        layers, _ = doc_layers(elmo, docs, is_train=False)
    vectors, backprop_head = head((docs, layers), is_train)

    def backprop(d_vectors):
        backprop_head(d_vectors)
        return []

    return vectors, backprop
