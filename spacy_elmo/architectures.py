"""Registered Thinc architectures, one short function each; the layers live in ``layers/``.

``spacy_elmo.ElmoModel.v1``: ``Model[List[List[str]], List[Floats3d]]``, the PyTorch ``BiLM`` in
a ``PyTorchWrapper``. It maps a batch of tokenized sequences to one array per sequence of shape
``(n_layers + 1, n_tokens, 2 * projection_dim)`` (float32, on the model's device: NumPy on the CPU,
CuPy after ``spacy.require_gpu()``). The architecture has no hyperparameters of its own: the biLM's
shape comes with its weights (``options.json``), which ``set_bilm`` puts in place (the ``elmo``
pipe does it from its weight files at ``initialize`` or on first use). ``model.to_bytes()`` carries
the options and the weights (safetensors) together, so a model restored with ``from_bytes`` needs
neither the original files nor ``initialize``.

``spacy_elmo.ElmoListener.v1``: a downstream component's ``tok2vec``, fed by the ``elmo`` pipe,
with its own learned layer mix (:mod:`spacy_elmo.layers.listener`). ``spacy_elmo.ElmoEmbedder.v1``: the
same mix on its own copy of the biLM, what ``nlp.replace_listeners`` leaves in a listener's place.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from .layers.bilm_model import elmo_model, get_bilm, set_bilm, torch_device
from .layers.embedder import elmo_embedder
from .layers.listener import ElmoListener
from .layers.mix_head import mix_head

__all__ = [
    "elmo_embedder_v1",
    "elmo_listener_v1",
    "elmo_model_v1",
    "get_bilm",
    "set_bilm",
    "torch_device",
]


@registry.architectures("spacy_elmo.ElmoModel.v1")
def elmo_model_v1() -> Model[List[List[str]], List[Floats3d]]:
    """The biLM, without weights until ``set_bilm`` (or ``from_bytes``) gives it some."""
    model = elmo_model()
    model.attrs["replace_listener"] = replace_listener
    model.attrs["replace_listener_cfg"] = replace_listener_cfg
    return model


@registry.architectures("spacy_elmo.ElmoListener.v1")
def elmo_listener_v1(
    width: int,
    upstream: str = "*",
    dropout: float = 0.0,
    token_embed: Optional[Model[List[Doc], List[Floats2d]]] = None,
    layer_norm: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """A downstream component's view of the ``elmo`` pipe: its own scalar mix of the biLM layers
    (softmax weights and gamma, learned with the task; ``layer_norm``: each layer normalised per
    doc first, AllenNLP's ``do_layer_norm``), ``dropout`` on the mix, optionally concatenated with
    ``token_embed`` (e.g. ``spacy.MultiHashEmbed.v2``), projected by a Maxout layer to ``width``.
    Output: one ``(len(doc), width)`` array per doc."""
    return ElmoListener(upstream, mix_head(width, dropout, token_embed, layer_norm))


@registry.architectures("spacy_elmo.ElmoEmbedder.v1")
def elmo_embedder_v1(
    elmo: Model[List[List[str]], List[Floats3d]],
    width: int,
    dropout: float = 0.0,
    token_embed: Optional[Model[List[Doc], List[Floats2d]]] = None,
    max_sequence_length: int = 256,
    max_batch_tokens: int = 4096,
    threads: Optional[int] = 1,
    layer_norm: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """A listener with its own copy of the biLM (``elmo``, frozen): what
    ``nlp.replace_listeners`` leaves in place of an ``ElmoListener.v1``. ``threads``: PyTorch
    threads while its biLM runs (null: PyTorch's own setting)."""
    return elmo_embedder(
        elmo,
        mix_head(width, dropout, token_embed, layer_norm),
        max_sequence_length,
        max_batch_tokens,
        threads,
    )


def replace_listener(copied_elmo: Model, listener: ElmoListener, pipe) -> Model:
    """``nlp.replace_listeners`` hook: the listener's own mix on a copy of the pipe's biLM."""
    return elmo_embedder(
        copied_elmo, listener.head, pipe.max_sequence_length, pipe.max_batch_tokens, pipe.threads
    )


def replace_listener_cfg(elmo_cfg: Dict[str, Any], tok2vec_cfg: Dict[str, Any]) -> Dict[str, Any]:
    """``nlp.replace_listeners`` hook for the config: an ``ElmoEmbedder.v1`` block with the
    listener's settings (found in the component's tok2vec block, or nested in it)."""
    listener_cfg = _find_listener_cfg(tok2vec_cfg)
    if listener_cfg is None:
        raise ValueError("replace_listeners: no spacy_elmo.ElmoListener.v1 block in the tok2vec config")
    new_cfg = {"@architectures": "spacy_elmo.ElmoEmbedder.v1", "elmo": dict(elmo_cfg)}
    for key in ("width", "dropout", "token_embed", "layer_norm"):
        if key in listener_cfg:
            new_cfg[key] = listener_cfg[key]
    return new_cfg


def _find_listener_cfg(cfg: Any) -> Optional[Dict[str, Any]]:
    if isinstance(cfg, dict):
        if cfg.get("@architectures") == "spacy_elmo.ElmoListener.v1":
            return cfg
        for value in cfg.values():
            found = _find_listener_cfg(value)
            if found is not None:
                return found
    return None
