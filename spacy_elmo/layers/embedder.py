"""``ElmoEmbedder``: a listener's head on its own copy of the biLM, what
``nlp.replace_listeners`` leaves where an ``ElmoListener`` was."""

from __future__ import annotations

from typing import List, Optional

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d

from ..doc_layers import doc_layers
from ..nn.threads import threads_in_this_process, torch_threads
from .bilm_model import get_bilm


def elmo_embedder(
    elmo: Model,
    head: Model,
    max_sequence_length: int = 256,
    max_batch_tokens: int = 4096,
    threads: Optional[int] = 1,
) -> Model[List[Doc], List[Floats2d]]:
    """A self-contained ``Model[List[Doc], List[Floats2d]]``: its own biLM (``elmo``, an
    ``ElmoModel``) feeding a ``MixHead``. What ``replace_listeners`` puts where a listener was.
    ``threads``: PyTorch threads while the biLM runs, as the pipe's setting."""
    return Model(
        "elmo-embedder",
        _embedder_forward,
        init=_embedder_init,
        dims={"nO": head.get_dim("nO")},
        attrs={
            "max_sequence_length": max_sequence_length,
            "max_batch_tokens": max_batch_tokens,
            "threads": threads,
        },
        layers=[elmo, head],
    )


def _embedder_init(model: Model, X=None, Y=None) -> Model:
    elmo, head = model.layers
    bilm = get_bilm(elmo)
    if bilm is None:
        raise ValueError("ElmoEmbedder has no biLM weights: load them with from_bytes/from_disk")
    if not head.has_dim("nL"):
        head.set_dim("nL", bilm.n_output_layers)
        head.set_dim("nI", bilm.output_dim)
    if not head.has_param("s"):
        head.initialize(X=(X, None) if X is not None else None)
    return model


def _embedder_forward(model: Model, docs: List[Doc], is_train: bool):
    elmo, head = model.layers
    with torch_threads(threads_in_this_process(model.attrs.get("threads", 1))):
        layers, _ = doc_layers(
            elmo,
            docs,
            n_layers=head.get_dim("nL"),
            width=head.get_dim("nI"),
            max_sequence_length=model.attrs["max_sequence_length"],
            max_batch_tokens=model.attrs["max_batch_tokens"],
            is_train=False,  # the copied biLM stays frozen, as in the pipeline it came from
        )
    vectors, backprop_head = head((docs, layers), is_train)

    def backprop(d_vectors):
        backprop_head(d_vectors)
        return []

    return vectors, backprop
