"""The pretraining objective: forward and backward LMs over one biLM, one shared softmax (the
docs/reference/pretraining-config.md, [objective] and [corpus]).

One kind of batch, ``LMBatch``: each direction's rows in its reading order, each position
predicting the next token; whole sentences from zero LSTM states (``make_batch``) or windows of
running text whose LSTM states the caller carries on (``make_window_batch``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn
from torch.profiler import record_function

from ..chars import BOS_TOKEN, EOS_TOKEN, tokens_to_ids
from ..nn.bilm import BiLM, BiLMStates
from ..nn.directions import LSTMRun, run_directions
from ..nn.lstm import dropout_masks, length_mask
from ..nn.precision import compiling, precision_context
from ..nn.side_by_side import how_to_run
from ..nn.softmax import LMSoftmax
from .vocab import Vocab

#: The parts of a training step as the profiler names them (``torch.profiler.record_function``
#: ranges, cheap when no profiler runs): what ``benchmarks pretrain`` splits a step's time by.
PHASES = {
    "batch": "pretrain.batch",
    "char_cnn": "pretrain.char_cnn",
    "lstm": "pretrain.lstm",
    "softmax": "pretrain.softmax",
    "backward": "pretrain.backward",
    "optimizer": "pretrain.optimizer",
}


@dataclass
class LMBatch:
    """One batch, both directions' rows of B rows of T positions, each in its reading order: whole
    sentences (``make_batch``, from zero LSTM states) or windows of running text
    (``make_window_batch``, whose LSTM states the caller carries on, every shape fixed by the
    config so that their forward reads nothing back).

    char_ids: (U, 50) char ids of the distinct input tokens, U >= n_distinct: a static step pads
        them to its fixed count with all-padding rows (``static_step._padded``).
    index: (2, B, T) rows of char_ids holding each position's token: forward, backward.
    targets: (2, B, T) vocabulary ids each position predicts: the next token of the row in
        either direction's reading order.
    lengths: (B,) sentences: each row's positions (its tokens and one boundary), the same in both
        directions, padding after them; None: windows, every position.
    n_distinct: how many rows of char_ids are tokens (a host int).
    """

    char_ids: torch.Tensor
    index: torch.Tensor
    targets: torch.Tensor
    lengths: Optional[torch.Tensor]
    n_distinct: int

    @property
    def windows(self) -> bool:
        return self.lengths is None

    @property
    def n_targets(self) -> int:
        """Predictions per direction: every position (a sentence batch's count read to the host)."""
        return self.index[0].numel() if self.lengths is None else int(self.lengths.sum())

    def to(self, device: torch.device) -> "LMBatch":
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return LMBatch(move(self.char_ids), move(self.index), move(self.targets), move(self.lengths), self.n_distinct)


def make_window_batch(
    forward: Sequence[Sequence[str]], backward: Sequence[Sequence[str]], vocab: Vocab
) -> LMBatch:
    """Windows of ``length + 1`` tokens per row, in each direction's reading order, -> an LMBatch
    of ``length`` positions. Each distinct token is encoded once (a static step pads them to its
    fixed count: ``static_step._padded``)."""
    unique: Dict[str, int] = {}
    index = np.zeros((2, len(forward), len(forward[0]) - 1), dtype=np.int64)
    targets = np.zeros(index.shape, dtype=np.int64)
    for direction, rows in enumerate((forward, backward)):
        for row, tokens in enumerate(rows):
            index[direction, row] = [unique.setdefault(t, len(unique)) for t in tokens[:-1]]
            targets[direction, row] = vocab.ids(tokens[1:])
    char_ids = tokens_to_ids(list(unique))
    return LMBatch(torch.from_numpy(char_ids), torch.from_numpy(index), torch.from_numpy(targets), None, len(unique))


def make_batch(sequences: Sequence[Sequence[str]], vocab: Vocab) -> LMBatch:
    """Token sequences -> an LMBatch of sentences: each read from ``<S>`` to ``</S>`` (forward)
    and back (backward), each position predicting the next token. Each distinct token string is
    encoded once."""
    width = max(len(s) for s in sequences) + 1
    unique: Dict[str, int] = {BOS_TOKEN: 0, EOS_TOKEN: 1}
    index = np.zeros((2, len(sequences), width), dtype=np.int64)
    targets = np.zeros(index.shape, dtype=np.int64)
    for row, tokens in enumerate(sequences):
        ids = [0, *(unique.setdefault(t, len(unique)) for t in tokens), 1]
        words = vocab.encode(tokens)  # with <S> and </S>
        for direction, (read, predicted) in enumerate(((ids, words), (ids[::-1], words[::-1]))):
            index[direction, row, : len(tokens) + 1] = read[:-1]
            targets[direction, row, : len(tokens) + 1] = predicted[1:]
    lengths = torch.tensor([len(s) + 1 for s in sequences])
    char_ids = tokens_to_ids(list(unique))
    return LMBatch(torch.from_numpy(char_ids), torch.from_numpy(index), torch.from_numpy(targets), lengths, len(unique))


class BiLMLanguageModel(nn.Module):
    """The biLM plus the shared softmax; ``forward`` returns summed NLLs per direction.

    ``precision`` (``nn/precision.py``) covers the whole step, biLM and softmax, as it does the
    biLM's inference (TF32 is the process's setting, which neither writes). The ``[training]``
    keys of the same names say how the LSTM runs, the same numbers up to float rounding:
    ``directions_on_streams`` (on CUDA, the two directions on two streams: ``nn/side_by_side.py``),
    ``lstm_wavefront`` (windows: each direction's layers in a wavefront,
    ``DirectionalLSTM.forward``) and ``fused_cell`` (windows: the cell compiled, its shapes fixed)."""

    def __init__(
        self,
        bilm: BiLM,
        softmax: LMSoftmax,
        dropout: float = 0.1,
        precision: str = "fp32",
        *,
        directions_on_streams: bool = False,
        lstm_wavefront: bool = False,
        fused_cell: bool = False,
    ) -> None:
        super().__init__()
        self.bilm = bilm
        self.softmax = softmax
        self.dropout = dropout
        self.precision = precision
        self.directions_on_streams = directions_on_streams
        self.lstm_wavefront = lstm_wavefront
        self.fused_cell = fused_cell
        #: True: the biLM runs without gradients and only the softmax learns (see
        #: ``[initialize] softmax_only_steps``).
        self.bilm_frozen = False

    def forward(
        self,
        batch: LMBatch,
        n_samples: Optional[int] = None,
        generator: Optional[torch.Generator] = None,
        states: Optional[BiLMStates] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, BiLMStates]]:
        """Returns (2,) float: summed NLL of the forward and of the backward LM; for windows, also
        the LSTM states the next window of each row starts from (detached), ``states`` being those
        this one starts from (None: zeros).

        ``n_samples`` None scores with the full softmax, else with the sampled softmax, whose
        negatives come from ``generator`` (None: torch's default one)."""
        with precision_context(self.precision, batch.targets.device):
            nll, states = self._nll(batch, n_samples, generator, states)
        return (nll, states) if batch.windows else nll

    def zero_states(self, rows: int, device: torch.device) -> BiLMStates:
        """Zero LSTM states of ``rows`` window rows: where the first window batch starts."""

        def zeros(lstm) -> List[Tuple[torch.Tensor, torch.Tensor]]:
            return [
                (torch.zeros(rows, layer.proj_size, device=device), torch.zeros(rows, layer.hidden_size, device=device))
                for layer in lstm.layers
            ]

        return BiLMStates(zeros(self.bilm.forward_lstm), zeros(self.bilm.backward_lstm))

    def _nll(
        self,
        batch: LMBatch,
        n_samples: Optional[int],
        generator: Optional[torch.Generator],
        states: Optional[BiLMStates],
    ) -> Tuple[torch.Tensor, BiLMStates]:
        hidden, targets, finals = self.predictions(batch, states)
        with record_function(PHASES["softmax"]):
            if n_samples:
                nll = self.softmax.sampled_nll(hidden, targets, n_samples, generator)
            else:
                nll = self.softmax.full_nll(hidden, targets)
        return nll.view(2, -1).sum(1), finals

    def predictions(
        self, batch: LMBatch, states: Optional[BiLMStates] = None
    ) -> Tuple[torch.Tensor, torch.Tensor, BiLMStates]:
        """What the softmax scores on ``batch``: the top layer's outputs where the forward LM
        predicts, then where the backward LM does, (2n, dim) with the top layer's dropout in
        training; their targets (2n,); the LSTM states each direction ends in."""
        drop = self.dropout if self.training else 0.0
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.bilm_frozen):
            with record_function(PHASES["char_cnn"]):
                # A static step's shapes are fixed; an eager step on the CPU, where reading the
                # longest token back costs nothing, convolves only the positions that count.
                static = batch.char_ids.is_cuda or compiling()
                vectors = self.bilm.token_encoder(batch.char_ids, all_positions=static)
            with record_function(PHASES["lstm"]):
                tops, finals = self._directions(vectors, batch, states, drop)
        with record_function(PHASES["softmax"]):
            hidden = torch.stack([nn.functional.dropout(top, drop, self.training) for top in tops])
            targets = batch.targets
            if not batch.windows:  # the positions of each sentence (sizes read to the host)
                predicts = length_mask(batch.lengths, targets.shape[2])
                hidden, targets = hidden[:, predicts], targets[:, predicts]
        return hidden.flatten(0, -2), targets.flatten(), finals

    def _directions(
        self, vectors: torch.Tensor, batch: LMBatch, states: Optional[BiLMStates], dropout: float
    ) -> Tuple[List[torch.Tensor], BiLMStates]:
        """Both LSTM stacks over their rows of ``vectors`` (``batch.index[k]``) from ``states``
        (windows: carried on): the top layers (B, T, dim) and each direction's final states,
        detached. The dropout masks are drawn first, in the order the directions one after the
        other draw them: the same numbers whether they run so, side by side on threads (the CPU
        with two threads or more, where PyTorch would split each small op of the per-step loop
        over its threads), on CUDA streams or compiled (``nn/directions.py``)."""
        lstms = (self.bilm.forward_lstm, self.bilm.backward_lstm)
        masks = None
        if dropout and self.training:
            masks = [dropout_masks(lstm, *batch.index.shape[1:], dropout, vectors) for lstm in lstms]
        precision, device = self.precision, vectors.device
        run = LSTMRun(
            self._how(vectors), wavefront=self.lstm_wavefront, fused_cell=self.fused_cell and batch.windows,
            context=lambda: precision_context(precision, device), one_thread_each=True,
        )  # fmt: skip
        outputs = run_directions(lstms, vectors, batch.index, batch.lengths, states, masks, run)
        finals = [[(h.detach(), c.detach()) for h, c in direction[1]] for direction in outputs]
        return [direction[0][-1] for direction in outputs], BiLMStates(*finals)

    def _how(self, x: torch.Tensor) -> str:
        """How the two directions run on ``x`` (``nn/side_by_side.py``): on threads where the
        CPU has two or more, on two CUDA streams where ``directions_on_streams``, else one after
        the other; all three give the same numbers."""
        if compiling():  # (torch.get_num_threads would break the traced graph)
            return "sequential"
        return how_to_run(x.device, torch.get_num_threads(), self.directions_on_streams)


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
