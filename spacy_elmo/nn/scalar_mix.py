"""ELMo's task-specific layer mix: ``gamma * sum_j softmax(s)_j * h_j`` (Peters et al. 2018, eq. 1)."""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

#: Added to the variance before the layer norm's square root, as in AllenNLP's ``ScalarMix``.
LAYER_NORM_EPS = 1e-12


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

    def normalized_weights(self) -> torch.Tensor:
        """softmax(s), shape (n_layers,)."""
        return torch.softmax(self.scalar_parameters, dim=0)

    def forward(self, layers: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """layers: (n_layers, *shape, dim) -> (*shape, dim); mask (*shape) bool for layer norm."""
        if layers.shape[0] != self.n_layers:
            raise ValueError(
                f"ScalarMix built for {self.n_layers} layers got a tensor with {layers.shape[0]} "
                f"(shape {tuple(layers.shape)})"
            )
        if self.layer_norm:
            layers = _masked_layer_norm(layers, mask)
        weights = self.normalized_weights().to(layers.dtype)
        mixed = torch.tensordot(weights, layers, dims=([0], [0]))
        return self.gamma.to(layers.dtype) * mixed


def _masked_layer_norm(layers: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    if mask is None:
        mask = torch.ones(layers.shape[1:-1], dtype=torch.bool, device=layers.device)
    m = mask[None, ..., None].to(layers.dtype)
    dims = tuple(range(1, layers.dim()))
    count = (m.sum() * layers.shape[-1]).clamp(min=1)
    mean = (layers * m).sum(dim=dims, keepdim=True) / count
    var = (((layers - mean) * m) ** 2).sum(dim=dims, keepdim=True) / count
    return (layers - mean) / torch.sqrt(var + LAYER_NORM_EPS)
