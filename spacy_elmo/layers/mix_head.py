"""A listener's task-specific head: its own scalar mix of the biLM layers, dropout, optional
token embedding, Maxout to ``width`` (Peters et al. 2018, eq. 1, then ``[x_k; ELMo_k]``)."""

from __future__ import annotations

from typing import List, Optional, Tuple

from spacy.tokens import Doc
from thinc.api import Maxout, Model, with_array
from thinc.types import Floats2d, Floats3d

from .mix import layer_norm, scalar_mix, softmax_scale_backprop

MixInput = Tuple[List[Doc], List[Floats3d]]


def mix_head(
    width: int,
    dropout: float = 0.0,
    token_embed: Optional[Model] = None,
    layer_norm: bool = False,
) -> Model[MixInput, List[Floats2d]]:
    """The task-specific part: scalar mix (of layer-normalised layers with ``layer_norm``),
    dropout, optional token embedding, Maxout to width.

    Input ``(docs, layers)``: each layers array ``(nL, len(doc), nI)``. Params: ``s`` (nL,) and
    ``gamma`` (1,), initialised to an equal mix and 1.
    """
    projection = with_array(Maxout(nO=width, nP=3, normalize=True))
    layers = [projection] + ([token_embed] if token_embed is not None else [])
    return Model(
        "elmo-mix",
        _mix_forward,
        init=_mix_init,
        dims={"nO": width, "nL": None, "nI": None},
        params={"s": None, "gamma": None},
        attrs={"dropout_rate": dropout, "layer_norm": layer_norm},
        layers=layers,
    )


def _mix_init(model: Model, X: Optional[MixInput] = None, Y=None) -> Model:
    n_layers, width = model.get_dim("nL"), model.get_dim("nI")
    model.set_param("s", model.ops.alloc1f(n_layers))
    model.set_param("gamma", model.ops.asarray1f([1.0]))
    docs = X[0] if X is not None else None
    extra = 0
    if len(model.layers) > 1:
        token_embed = model.layers[1]
        token_embed.initialize(X=docs)
        extra = token_embed.get_dim("nO")
    # The Maxout projection infers its input width from a sample.
    model.layers[0].initialize(X=[model.ops.alloc2f(1, width + extra)])
    return model


def _mix_forward(model: Model, X: MixInput, is_train: bool):
    docs, layers = X
    ops = model.ops
    s, gamma = model.get_param("s"), model.get_param("gamma")
    weights = ops.softmax(s)
    backprop_norm = None
    if model.attrs["layer_norm"]:
        layers, backprop_norm = layer_norm(ops, layers)
    mixed, backprop_mix = scalar_mix(ops, weights, gamma[0], layers)
    rate = model.attrs["dropout_rate"] if is_train else 0.0
    masks = [ops.get_dropout_mask(m.shape, rate) if rate else None for m in mixed]
    dropped = [m * mask if mask is not None else m for m, mask in zip(mixed, masks)]
    if len(model.layers) > 1:
        embedded, backprop_embed = model.layers[1](docs, is_train)
        features = [ops.xp.hstack([m, e]) for m, e in zip(dropped, embedded)]
    else:
        features, backprop_embed = dropped, None
    outputs, backprop_projection = model.layers[0](features, is_train)
    width = model.get_dim("nI")

    def backprop(d_outputs: List[Floats2d]) -> List[Floats3d]:
        d_features = backprop_projection(d_outputs)
        if backprop_embed is not None:
            backprop_embed([d[:, width:] for d in d_features])
        d_mixed = [d[:, :width] for d in d_features]
        d_mixed = [d * mask if mask is not None else d for d, mask in zip(d_mixed, masks)]
        d_scale, d_layers = backprop_mix(d_mixed)
        d_s, d_gamma = softmax_scale_backprop(weights, gamma[0], d_scale)
        model.inc_grad("s", d_s)
        model.inc_grad("gamma", ops.asarray1f([d_gamma]))
        return backprop_norm(d_layers) if backprop_norm is not None else d_layers

    return outputs, backprop
