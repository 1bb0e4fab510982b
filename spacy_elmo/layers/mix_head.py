"""A listener's task-specific head: its own scalar mix of the biLM layers, dropout, optional token
embedding, Maxout to ``width`` (Peters et al. 2018, eq. 1, then ``[x_k; ELMo_k]``). The mix is
``nn.scalar_mix`` under autograd on Thinc parameters (docs/design.md says why).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import torch
from spacy.tokens import Doc
from thinc.api import Maxout, Model, torch2xp, with_array, xp2torch
from thinc.types import Floats2d, Floats3d

from ..nn.scalar_mix import mix_scale, normalize_layers, weighted_sum

MixInput = Tuple[List[Doc], List[Floats3d]]


def mix_head(
    width: int,
    dropout: float = 0.0,
    token_embed: Optional[Model] = None,
    layer_norm: bool = False,
) -> Model[MixInput, List[Floats2d]]:
    """Scalar mix (with ``layer_norm``, statistics per doc, so a doc's features do not depend on its
    batch), dropout, optional token embedding, Maxout to width. Input ``(docs, layers)``, layers
    ``(nL, len(doc), nI)`` each; params ``s`` (nL,) and ``gamma`` (1,), an equal mix and 1 at first.
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


def size_head(head: Model, n_layers: int, width: int) -> None:
    """The layers (nL) and width (nI) the head mixes, set once, at its layer's init from the biLM
    it listens to; a head that has them (a trained one) must be given the same."""
    check_head(head, n_layers, width)
    head.set_dim("nL", n_layers)
    head.set_dim("nI", width)


def check_head(head: Model, n_layers: int, width: int) -> None:
    """Refuse layers of another shape than the head's, naming both (the upstream pipe's model
    changed after the listening component was trained)."""
    for name, value in (("nL", n_layers), ("nI", width)):
        if head.has_dim(name) and head.get_dim(name) != value:
            raise ValueError(
                f"ElmoListener was built for a biLM with {name}={head.get_dim(name)}, the "
                f"upstream elmo pipe has {value}: the pipe's model changed after the listening "
                "component was trained"
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


def _mix(model: Model, layers: List[Floats3d], is_train: bool):
    """Per doc ``(nL, n_tokens, nI)`` -> ``(n_tokens, nI)``; backprop adds to s, gamma."""
    ops = model.ops
    if not layers:
        return [], lambda d_mixed: []
    lengths = [x.shape[1] for x in layers]
    params = [xp2torch(model.get_param(name), requires_grad=is_train) for name in ("s", "gamma")]
    joined = xp2torch(ops.xp.concatenate(layers, axis=1), requires_grad=is_train)
    with torch.set_grad_enabled(is_train):
        scale = mix_scale(*params)
        normed = joined
        if model.attrs["layer_norm"]:  # statistics per doc
            normed = torch.cat([normalize_layers(x) for x in torch.split(joined, lengths, dim=1)], dim=1)
        output = weighted_sum(normed, scale)
    starts = np.cumsum(lengths)[:-1].tolist()  # where each doc after the first starts
    mixed = ops.xp.split(torch2xp(output.detach()), starts)

    def backprop(d_mixed: List[Floats2d]) -> List[Floats3d]:
        output.backward(xp2torch(ops.xp.concatenate(d_mixed)))
        for name, param in zip(("s", "gamma"), params):
            model.inc_grad(name, torch2xp(param.grad))
        return ops.xp.split(torch2xp(joined.grad), starts, axis=1)

    return mixed, backprop


def _mix_forward(model: Model, X: MixInput, is_train: bool):
    docs, layers = X
    ops = model.ops
    mixed, backprop_mix = _mix(model, layers, is_train)
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
        return backprop_mix(d_mixed)

    return outputs, backprop
