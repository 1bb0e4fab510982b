"""ELMo's layer mix on Thinc arrays, shared by the ``elmo`` pipe and the listeners.

``mixed_k = sum_j scale_j h_kj`` with ``scale = gamma * w`` (Peters et al. 2018, eq. 1). The pipe
passes its fixed normalised weights; a listener passes ``softmax(s)`` and learns ``s`` and
``gamma`` through ``backprop``, optionally after :func:`layer_norm` (AllenNLP's
``do_layer_norm``). (``spacy_elmo.ScalarMix`` is the same formula as a PyTorch module, for users of
the bare biLM.)
"""

from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np
from thinc.api import Ops
from thinc.types import Floats1d, Floats2d, Floats3d

from ..nn.scalar_mix import LAYER_NORM_EPS

MixBackprop = Callable[[List[Floats2d]], Tuple[Floats1d, List[Floats3d]]]
NormBackprop = Callable[[List[Floats3d]], List[Floats3d]]


def default_mix_weights(n_layers: int) -> np.ndarray:
    """The pipe's mix when ``mix_weights`` is null, (n_layers,) float32: the LSTM layers equally
    and not the token layer, which is the same for every occurrence of a word and, longer than
    the LSTM outputs, would pull all cosines of a word towards 1 (``python -m benchmarks senses``)."""
    weights = np.full(n_layers, 1.0 / (n_layers - 1), dtype=np.float32)
    weights[0] = 0.0
    return weights


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


def layer_norm(ops: Ops, layers: List[Floats3d]) -> Tuple[List[Floats3d], NormBackprop]:
    """Each layer of each doc minus the mean of all its elements, over their standard deviation.

    Statistics per doc (AllenNLP pools them over the padded batch), so a doc's features do not
    depend on the docs batched with it; a doc without tokens passes through unchanged. The biLM's
    layers differ in scale (the token layer is about twice as long as the LSTM layers in the
    bundled model), so without it the largest layer dominates the mix at its initial equal weights.
    """
    normed, inverse_stds = [], []
    for doc_layers in layers:
        if doc_layers.size == 0:
            normed.append(doc_layers)
            inverse_stds.append(None)
            continue
        centered = doc_layers - doc_layers.mean(axis=(1, 2), keepdims=True)
        inverse_std = 1.0 / ops.xp.sqrt((centered**2).mean(axis=(1, 2), keepdims=True) + LAYER_NORM_EPS)
        normed.append(centered * inverse_std)
        inverse_stds.append(inverse_std)

    def backprop(d_normed: List[Floats3d]) -> List[Floats3d]:
        d_layers = []
        for y, inverse_std, d in zip(normed, inverse_stds, d_normed):
            if inverse_std is None:
                d_layers.append(d)
                continue
            d_mean = d.mean(axis=(1, 2), keepdims=True)
            dy_y = (d * y).mean(axis=(1, 2), keepdims=True)
            d_layers.append(inverse_std * (d - d_mean - y * dy_y))
        return d_layers

    return normed, backprop
