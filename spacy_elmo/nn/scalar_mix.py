"""ELMo's task-specific layer mix: ``gamma * sum_j softmax(s)_j * h_j`` (Peters et al. 2018, eq. 1).

The one implementation of the mix: the :class:`ScalarMix` module for users of the bare biLM, the
``elmo`` pipe's fixed mix (:func:`weighted_sum`) and a listener's learned mix
(``layers/mix_head.py``, which runs :func:`scalar_mix` on its Thinc parameters under autograd).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch
from torch import nn

#: Added to the variance before the layer norm's square root, as in AllenNLP's ``ScalarMix``.
LAYER_NORM_EPS = 1e-12


def default_mix_weights(n_layers: int) -> np.ndarray:
    """The pipe's mix for null ``mix_weights``, (n_layers,) float32: the LSTM layers equally, not
    the token layer, which pulls all cosines of a word towards 1 (``benchmarks senses``)."""
    weights = np.full(n_layers, 1.0 / (n_layers - 1), dtype=np.float32)
    weights[0] = 0.0
    return weights


def weighted_sum(layers: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``sum_j scale_j layers_j``: (n_layers, *shape, dim), scale (n_layers,) -> (*shape, dim)."""
    return torch.tensordot(scale.to(layers.dtype), layers, dims=([0], [0]))


def mix_scale(s: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """``gamma * softmax(s)``, (n_layers,): the learned mix's scale."""
    return gamma * torch.softmax(s, dim=0)


def scalar_mix(
    layers: torch.Tensor,
    s: torch.Tensor,
    gamma: torch.Tensor,
    layer_norm: bool = False,
    mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``gamma * sum_j softmax(s)_j h_j``, each layer first normalised over all its unmasked
    elements with ``layer_norm``: layers (n_layers, *shape, dim) -> (*shape, dim)."""
    if layer_norm:
        layers = normalize_layers(layers, mask)
    return weighted_sum(layers, mix_scale(s, gamma))


class ScalarMix(nn.Module):
    """Mix ``n_layers`` tensors of the same shape with softmax-normalised scalar weights.

    Args:
        n_layers: number of layers to mix (n_lstm_layers + 1 for ELMo).
        initial_weights: the unnormalised weights s (default zeros: an equal mix).
        initial_gamma: the scale gamma (default 1).
        trainable: learn s and gamma with the task.
        layer_norm: normalise each layer before mixing, over all unmasked elements of the
            batch (AllenNLP's ``do_layer_norm``; the statistics then depend on the batch).
    """

    def __init__(
        self,
        n_layers: int,
        initial_weights: Optional[Sequence[float]] = None,
        initial_gamma: float = 1.0,
        trainable: bool = True,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        if initial_weights is None:
            initial_weights = [0.0] * n_layers
        if len(initial_weights) != n_layers:
            raise ValueError(
                f"ScalarMix: {len(initial_weights)} initial weights given for {n_layers} layers"
            )
        self.n_layers = n_layers
        self.layer_norm = layer_norm
        self.scalar_parameters = nn.Parameter(
            torch.tensor(list(initial_weights), dtype=torch.float32), requires_grad=trainable
        )
        self.gamma = nn.Parameter(torch.tensor([float(initial_gamma)]), requires_grad=trainable)

    def forward(self, layers: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """layers: (n_layers, *shape, dim) -> (*shape, dim); mask (*shape) bool for layer norm."""
        if layers.shape[0] != self.n_layers:
            raise ValueError(
                f"ScalarMix built for {self.n_layers} layers got a tensor with {layers.shape[0]} "
                f"(shape {tuple(layers.shape)})"
            )
        return scalar_mix(layers, self.scalar_parameters, self.gamma, self.layer_norm, mask)


def normalize_layers(layers: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Each layer standardised over its unmasked elements; same shape; an empty one unchanged."""
    dims = tuple(range(1, layers.dim()))
    if mask is None:
        if layers.numel() == 0:
            return layers
        centered = layers - layers.mean(dim=dims, keepdim=True)
        return centered * torch.rsqrt((centered**2).mean(dim=dims, keepdim=True) + LAYER_NORM_EPS)
    m = mask[None, ..., None].to(layers.dtype)
    count = (m.sum() * layers.shape[-1]).clamp(min=1)
    mean = (layers * m).sum(dim=dims, keepdim=True) / count
    var = (((layers - mean) * m) ** 2).sum(dim=dims, keepdim=True) / count
    return (layers - mean) / torch.sqrt(var + LAYER_NORM_EPS)
