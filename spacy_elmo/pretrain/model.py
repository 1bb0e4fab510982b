"""The pretraining objective: forward and backward LMs over one biLM, one shared softmax.

Each sequence is read as ``<S> w_1 .. w_n </S>``. The forward LM's top layer at position t predicts
token t + 1; the backward LM's at position t predicts token t - 1. The loss is the mean of the two
directions' mean negative log-likelihoods (Peters et al. 2018, eq. in section 3.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..chars import BOS_TOKEN, EOS_TOKEN, tokens_to_ids
from ..nn.bilm import BiLM
from ..nn.lstm import DistinctInputs
from ..nn.precision import precision_context
from ..nn.softmax import LMSoftmax
from .vocab import Vocab


@dataclass
class LMBatch:
    """Tensors for one batch of B sequences of at most T tokens (boundaries included).

    unique_char_ids: (U, 50) char ids of the distinct tokens of the batch.
    token_index: (B, T) index into unique_char_ids (0 at padding, masked later).
    lengths: (B,) tokens per sequence including ``<S>`` and ``</S>``.
    targets: (B, T) softmax vocabulary ids of every position.
    """

    unique_char_ids: torch.Tensor
    token_index: torch.Tensor
    lengths: torch.Tensor
    targets: torch.Tensor

    @property
    def n_targets(self) -> int:
        """Predictions per direction: every token but the first (forward) / last (backward)."""
        return int((self.lengths - 1).sum())

    def to(self, device: torch.device) -> "LMBatch":
        return LMBatch(*(t.to(device, non_blocking=True) for t in vars(self).values()))

    @classmethod
    def merge(cls, batches: Sequence["LMBatch"]) -> "LMBatch":
        """One batch holding the sequences of several (as one process would see a DDP step)."""
        chars, index, lengths, targets, offset = [], [], [], [], 0
        width = max(b.token_index.shape[1] for b in batches)
        for b in batches:
            pad = width - b.token_index.shape[1]
            chars.append(b.unique_char_ids)
            index.append(nn.functional.pad(b.token_index + offset, (0, pad)))
            targets.append(nn.functional.pad(b.targets, (0, pad)))
            lengths.append(b.lengths)
            offset += b.unique_char_ids.shape[0]
        return cls(torch.cat(chars), torch.cat(index), torch.cat(lengths), torch.cat(targets))


def make_batch(sequences: Sequence[Sequence[str]], vocab: Vocab) -> LMBatch:
    """Token sequences -> LMBatch. Each distinct token string is encoded once."""
    width = max(len(s) for s in sequences) + 2
    unique: Dict[str, int] = {BOS_TOKEN: 0, EOS_TOKEN: 1}
    index = np.zeros((len(sequences), width), dtype=np.int64)
    targets = np.zeros((len(sequences), width), dtype=np.int64)
    for row, tokens in enumerate(sequences):
        ids = [unique.setdefault(t, len(unique)) for t in tokens]
        index[row, : len(tokens) + 2] = [0, *ids, 1]
        targets[row, : len(tokens) + 2] = vocab.encode(tokens)
    return LMBatch(
        torch.from_numpy(tokens_to_ids(list(unique))),
        torch.from_numpy(index),
        torch.tensor([len(s) + 2 for s in sequences]),
        torch.from_numpy(targets),
    )


class BiLMLanguageModel(nn.Module):
    """The biLM plus the shared softmax; ``forward`` returns summed NLLs per direction.

    ``precision`` (``nn/precision.py``) covers the whole step, biLM and softmax, as it does the
    biLM's inference (TF32 is the process's setting, which neither writes)."""

    def __init__(
        self, bilm: BiLM, softmax: LMSoftmax, dropout: float = 0.1, precision: str = "fp32"
    ) -> None:
        super().__init__()
        self.bilm = bilm
        self.softmax = softmax
        self.dropout = dropout
        self.precision = precision
        #: True: the biLM runs without gradients and only the softmax learns (see
        #: ``[initialize] softmax_only_steps``).
        self.bilm_frozen = False

    def forward(
        self,
        batch: LMBatch,
        n_samples: Optional[int] = None,
        generator: Optional[torch.Generator] = None,
    ) -> torch.Tensor:
        """Returns (2,) float: summed NLL of the forward and of the backward LM.

        ``n_samples`` None scores with the full softmax, else with the sampled softmax."""
        with precision_context(self.precision, batch.lengths.device):
            return self._nll(batch, n_samples, generator)

    def _nll(
        self, batch: LMBatch, n_samples: Optional[int], generator: Optional[torch.Generator]
    ) -> torch.Tensor:
        lengths = batch.lengths
        width = batch.token_index.shape[1]
        positions = torch.arange(width, device=lengths.device)[None, :]
        drop = self.dropout if self.training else 0.0
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.bilm_frozen):
            vectors = self.bilm.token_encoder(batch.unique_char_ids)
            acts = self.bilm.contextualize(
                DistinctInputs(vectors, batch.token_index), lengths, None, drop
            )
        forward_layers, backward_layers = acts.forward, acts.backward
        forward_top = nn.functional.dropout(forward_layers[-1], drop, self.training)
        backward_top = nn.functional.dropout(backward_layers[-1], drop, self.training)

        # forward: position t < length - 1 predicts t + 1; backward: 1 <= t < length predicts t - 1
        predicts = (positions < lengths[:, None] - 1)[:, : width - 1]
        hidden = torch.cat([forward_top[:, :-1][predicts], backward_top[:, 1:][predicts]])
        targets = torch.cat([batch.targets[:, 1:][predicts], batch.targets[:, :-1][predicts]])
        if n_samples:
            nll = self.softmax.sampled_nll(hidden, targets, n_samples, generator)
        else:
            nll = self.softmax.full_nll(hidden, targets)
        n = int(predicts.sum())
        return torch.stack([nll[:n].sum(), nll[n:].sum()])


def init_bilm_tf_style(bilm: BiLM) -> None:
    """bilm-tf's initialisation (bilm/training.py), in torch's parameter layout."""
    cnn = bilm.token_encoder
    embed_dim = cnn.char_embedding.embedding_dim
    with torch.no_grad():
        nn.init.uniform_(cnn.char_embedding.weight, -1.0, 1.0)
        cnn.char_embedding.weight[0].zero_()
        for conv, (width, _) in zip(cnn.convolutions, cnn.filters):
            if cnn.activation == "relu":
                nn.init.uniform_(conv.weight, -0.05, 0.05)
            else:
                nn.init.normal_(conv.weight, 0.0, math.sqrt(1.0 / (width * embed_dim)))
            nn.init.zeros_(conv.bias)
        d = cnn.n_filters
        for highway in cnn.highways:
            nn.init.normal_(highway.linear.weight, 0.0, math.sqrt(1.0 / d))
            nn.init.zeros_(highway.linear.bias)
            highway.linear.bias[d:] = -2.0  # carry gate starts mostly closed
        nn.init.normal_(cnn.projection.weight, 0.0, math.sqrt(1.0 / d))
        nn.init.zeros_(cnn.projection.bias)
        for direction in (bilm.forward_lstm, bilm.backward_lstm):
            for layer in direction.layers:
                h, p = layer.hidden_size, layer.proj_size
                fan_in = layer.input_size + p
                bound = math.sqrt(6.0 / (fan_in + 4 * h))  # glorot on TF's [in + p, 4h] kernel
                nn.init.uniform_(layer.weight_ih_l0, -bound, bound)
                nn.init.uniform_(layer.weight_hh_l0, -bound, bound)
                bound = math.sqrt(6.0 / (h + p))
                nn.init.uniform_(layer.weight_hr_l0, -bound, bound)
                nn.init.zeros_(layer.bias_ih_l0)
                nn.init.zeros_(layer.bias_hh_l0)
                layer.bias_ih_l0[h : 2 * h] = 1.0  # TensorFlow's forget_bias


def perplexity(nll_sum: float, count: int) -> float:
    return math.exp(min(nll_sum / max(count, 1), 50.0))
