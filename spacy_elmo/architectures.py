"""Registered Thinc architectures, one short function each; the layers live in ``layers/``:
``ElmoModel.v2`` (the biLM and what it needs to run), ``ElmoListener.v1`` (a component's ``tok2vec``
fed by the pipe) and ``ElmoEmbedder.v2`` (what ``nlp.replace_listeners`` leaves). docs/reference/config.md.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from .layers.bilm_model import ElmoModelSettings, elmo_model
from .layers.embedder import elmo_embedder
from .layers.listener import elmo_listener, listener_head
from .layers.mix_head import mix_head
from .loaders import weight_loader_v2
from .nn.precision import PrecisionName
from .validation import Fraction, StrictNonNegative, StrictPositive, Threads, checked_arguments


@registry.architectures("spacy_elmo.ElmoModel.v2")
@checked_arguments("spacy_elmo.ElmoModel.v2")
def elmo_model_v2(
    weights: Optional[str] = None,
    options_file: Optional[str] = None,
    weight_file: Optional[str] = None,
    precision: PrecisionName = "fp32",
    max_sequence_length: StrictPositive = 256,
    max_batch_tokens: StrictPositive = 4096,
    threads: Threads = "auto",
    token_cache_words: StrictNonNegative = 0,
    token_cache_vocab: Optional[str] = None,
) -> Model[List[List[str]], List[Floats3d]]:
    """The biLM and what it needs to run. Each sequence's output: a float32 array of shape
    (n_layers + 1, n_tokens, 2 * projection_dim) on the model's device.

    weights: a model directory or a model's name; or ``options_file`` + ``weight_file``; all null:
        the bundled model (``spacy_elmo.sources``); read by the model's init, through
        ``spacy_elmo.WeightLoader.v2`` as the ``[initialize]`` block's loader is.
    precision: "fp32", "bf16", "fp16" or "int8" (``spacy_elmo.nn.precision``).
    max_sequence_length: longest biLM sequence; longer ones are cut into windows.
    max_batch_tokens: padded tokens (sequences x longest sequence) per biLM call.
    threads: pieces each batch is split over (``spacy_elmo.nn.threads``; "auto").
    token_cache_words: token vectors kept for this many words, pre-filled from
        ``token_cache_vocab`` (default the ``vocab.txt`` beside the weights); 0: no cache."""
    load = weight_loader_v2(weights, options_file, weight_file)  # refuses settings that do not go together
    settings = ElmoModelSettings(
        precision=precision, max_sequence_length=max_sequence_length, max_batch_tokens=max_batch_tokens,
        threads=threads, token_cache_words=token_cache_words, token_cache_vocab=token_cache_vocab,
    )
    model = elmo_model(settings, load)
    model.attrs["replace_listener"] = replace_listener
    model.attrs["replace_listener_cfg"] = replace_listener_cfg
    return model


@registry.architectures("spacy_elmo.ElmoListener.v1")
@checked_arguments("spacy_elmo.ElmoListener.v1")
def elmo_listener_v1(
    width: StrictPositive,
    upstream: str = "*",
    dropout: Fraction = 0.0,
    token_embed: Optional[Model[List[Doc], List[Floats2d]]] = None,
    layer_norm: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """A downstream component's view of the ``elmo`` pipe: its own learned scalar mix
    (``layer_norm``: AllenNLP's ``do_layer_norm``), ``dropout``, optionally ``token_embed``
    concatenated, a Maxout to ``width``. Output: one ``(len(doc), width)`` array per doc."""
    return elmo_listener(upstream, mix_head(width, dropout, token_embed, layer_norm))


@registry.architectures("spacy_elmo.ElmoEmbedder.v2")
@checked_arguments("spacy_elmo.ElmoEmbedder.v2")
def elmo_embedder_v2(
    elmo: Model[List[List[str]], List[Floats3d]],
    width: StrictPositive,
    dropout: Fraction = 0.0,
    token_embed: Optional[Model[List[Doc], List[Floats2d]]] = None,
    layer_norm: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """A listener on its own frozen biLM copy: what ``replace_listeners`` leaves."""
    return elmo_embedder(elmo, mix_head(width, dropout, token_embed, layer_norm))


def replace_listener(copied_elmo: Model, listener: Model, pipe) -> Model:
    """``nlp.replace_listeners`` hook: the listener's mix on a copy of the pipe's biLM."""
    return elmo_embedder(copied_elmo, listener_head(listener))


def replace_listener_cfg(elmo_cfg: Dict[str, Any], tok2vec_cfg: Dict[str, Any]) -> Dict[str, Any]:
    """``nlp.replace_listeners`` config hook: an ``ElmoEmbedder.v2`` block."""
    listener_cfg = _find_listener_cfg(tok2vec_cfg)
    if listener_cfg is None:
        raise ValueError("replace_listeners: no spacy_elmo.ElmoListener.v1 block in the tok2vec config")
    new_cfg = {"@architectures": "spacy_elmo.ElmoEmbedder.v2", "elmo": dict(elmo_cfg)}
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


__all__ = ["elmo_embedder_v2", "elmo_listener_v1", "elmo_model_v2"]
