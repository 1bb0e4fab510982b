"""ELMo's layer mix on Thinc arrays, shared by the ``elmo`` pipe and the listeners.

``mixed_k = sum_j scale_j h_kj`` with ``scale = gamma * w`` (Peters et al. 2018, eq. 1). The pipe
passes its fixed normalised weights; a listener passes ``softmax(s)`` and learns ``s`` and
``gamma`` through ``backprop``. (``spacy_elmo.ScalarMix`` is the same formula as a PyTorch module,
for users of the bare biLM.)
"""

from __future__ import annotations

from typing import Callable, List, Tuple

from thinc.api import Ops
from thinc.types import Floats1d, Floats2d, Floats3d

MixBackprop = Callable[[List[Floats2d]], Tuple[Floats1d, List[Floats3d]]]


def scalar_mix(
    ops: Ops, weights: Floats1d, gamma: float, layers: List[Floats3d]
) -> Tuple[List[Floats2d], MixBackprop]:
    """Mix each doc's ``(n_layers, n_tokens, width)`` layers into ``(n_tokens, width)``.

    ``backprop(d_mixed)`` returns ``(d_scale, d_layers)``: the gradient of the per-layer scale
    ``gamma * weights`` (n_layers,), and one ``(n_layers, n_tokens, width)`` gradient per doc.
    """
    scale = weights * gamma
    mixed = [ops.xp.tensordot(scale, doc_layers, axes=(0, 0)) for doc_layers in layers]

    def backprop(d_mixed: List[Floats2d]) -> Tuple[Floats1d, List[Floats3d]]:
        d_scale = ops.alloc1f(len(scale))
        d_layers = []
        for doc_layers, d in zip(layers, d_mixed):
            d_scale += (doc_layers * d[None]).sum(axis=(1, 2))
            d_layers.append(scale[:, None, None] * d[None])
        return d_scale, d_layers

    return mixed, backprop


def softmax_scale_backprop(
    weights: Floats1d, gamma: float, d_scale: Floats1d
) -> Tuple[Floats1d, float]:
    """``scale = gamma * softmax(s)``: from the scale's gradient to ``(d_s, d_gamma)``, given
    ``weights = softmax(s)``."""
    d_gamma = float((d_scale * weights).sum())
    d_weights = d_scale * gamma
    d_s = weights * (d_weights - (d_weights * weights).sum())
    return d_s, d_gamma
