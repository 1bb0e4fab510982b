"""Downstream components on ELMo: the listener and its task-specific layer mix.

``ElmoListener`` stands where a component's ``tok2vec`` goes (or as the ``embed`` of
``spacy.Tok2Vec.v2``). It gets every biLM layer of every doc from the ``elmo`` pipe upstream and
computes, as in the paper (eq. 1, then ``[x_k; ELMo_k]``)::

    ELMo_k = gamma * sum_j softmax(s)_j h_kj          s, gamma learned with the task
    y_k    = Maxout(width)([dropout(ELMo_k); token_embed(x)_k])

Where the layers come from:
- fine-tuning (``elmo`` pipe with ``frozen = false``, updated in the same step): the pipe sends
  them with ``receive`` and the gradients go back into the biLM;
- frozen biLM, and at prediction time: from ``doc._.elmo_layers``, which the ``elmo`` pipe wrote
  (in training, list it in ``[training] frozen_components`` and ``annotating_components``).

``nlp.replace_listeners("elmo", "tagger", ["model.tok2vec"])`` swaps a listener for an
``ElmoEmbedder``: a copy of the biLM plus the listener's own mix (``MixHead``), so the component
no longer needs the ``elmo`` pipe.

The code lives in ``spacy_elmo/layers/`` (``listener.py``, ``mix_head.py``, ``embedder.py``);
this module keeps the names importable from here.
"""

from .layers.embedder import elmo_embedder
from .layers.listener import ElmoListener
from .layers.mix_head import MixInput, mix_head

__all__ = ["ElmoListener", "MixInput", "elmo_embedder", "mix_head"]
