"""The pretraining objective: forward and backward LMs over one biLM, one shared softmax (the
manual's "Pretraining a biLM", *Objective* and *Batching*).

Two kinds of batch: ``LMBatch``, whole sentences from zero LSTM states (``make_batch``), and
``WindowBatch``, windows of running text whose LSTM states the caller carries on
(``make_window_batch``), every shape fixed by the config so that its forward reads nothing back.
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
from ..nn.bilm import BiLM, BiLMStates, scatter_tokens
from ..nn.lstm import DistinctInputs, length_mask, window_dropout_masks
from ..nn.precision import compiling, get_precision, precision_context
from ..nn.side_by_side import how_to_run, run_side_by_side_of
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


@dataclass
class WindowBatch:
    """One batch of windows (``corpus.WindowStream``): B rows of T positions per direction.

    char_ids: (U, 50) char ids of the distinct input tokens, U >= n_distinct: a static step pads
        them to its fixed count with all-padding rows (``static_step._padded``).
    index: (2, B, T) rows of char_ids holding each position's token: forward, backward.
    targets: (2, B, T) vocabulary ids each position predicts: the next token of the row, in
        either direction's reading order.
    n_distinct: how many rows of char_ids are tokens (a host int).
    """

    char_ids: torch.Tensor
    index: torch.Tensor
    targets: torch.Tensor
    n_distinct: int

    @property
    def n_targets(self) -> int:
        """Predictions per direction: every position."""
        return self.index.shape[1] * self.index.shape[2]

    def to(self, device: torch.device) -> "WindowBatch":
        return WindowBatch(
            *(t.to(device, non_blocking=True) for t in (self.char_ids, self.index, self.targets)),
            self.n_distinct,
        )


def make_window_batch(
    forward: Sequence[Sequence[str]], backward: Sequence[Sequence[str]], vocab: Vocab
) -> WindowBatch:
    """Windows of ``length + 1`` tokens per row, in each direction's reading order, -> a
    WindowBatch of ``length`` positions. Each distinct token is encoded once (a static step pads
    them to its fixed count: ``static_step._padded``)."""
    unique: Dict[str, int] = {}
    index = np.zeros((2, len(forward), len(forward[0]) - 1), dtype=np.int64)
    targets = np.zeros(index.shape, dtype=np.int64)
    for direction, rows in enumerate((forward, backward)):
        for row, tokens in enumerate(rows):
            index[direction, row] = [unique.setdefault(t, len(unique)) for t in tokens[:-1]]
            targets[direction, row] = vocab.ids(tokens[1:])
    char_ids = tokens_to_ids(list(unique))
    return WindowBatch(
        torch.from_numpy(char_ids), torch.from_numpy(index), torch.from_numpy(targets), len(unique)
    )


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
    biLM's inference (TF32 is the process's setting, which neither writes). The ``[training]``
    keys of the same names say how the LSTM runs, the same numbers up to float rounding:
    ``directions_on_streams`` (on CUDA, the two directions on two streams: ``nn/side_by_side.py``),
    ``lstm_wavefront`` (windows: each direction's layers in a wavefront,
    ``DirectionalLSTM.forward_windows``) and ``fused_cell`` (windows: the cell compiled)."""

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
        batch: Union[LMBatch, WindowBatch],
        n_samples: Optional[int] = None,
        generator: Optional[torch.Generator] = None,
        states: Optional[BiLMStates] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, BiLMStates]]:
        """Returns (2,) float: summed NLL of the forward and of the backward LM; for a
        ``WindowBatch``, also the LSTM states the next window of each row starts from (detached),
        ``states`` being those this one starts from (None: zeros).

        ``n_samples`` None scores with the full softmax, else with the sampled softmax, whose
        negatives come from ``generator`` (None: torch's default one)."""
        with precision_context(self.precision, batch.targets.device):
            if isinstance(batch, WindowBatch):
                return self._window_nll(batch, n_samples, generator, states)
            return self._nll(batch, n_samples, generator)

    def zero_states(self, rows: int, device: torch.device) -> BiLMStates:
        """Zero LSTM states of ``rows`` window rows: where the first window batch starts."""

        def zeros(lstm) -> List[Tuple[torch.Tensor, torch.Tensor]]:
            return [
                (torch.zeros(rows, layer.proj_size, device=device), torch.zeros(rows, layer.hidden_size, device=device))
                for layer in lstm.layers
            ]

        return BiLMStates(zeros(self.bilm.forward_lstm), zeros(self.bilm.backward_lstm))

    def _window_nll(
        self,
        batch: WindowBatch,
        n_samples: Optional[int],
        generator: Optional[torch.Generator],
        states: Optional[BiLMStates],
    ) -> Tuple[torch.Tensor, BiLMStates]:
        drop = self.dropout if self.training else 0.0
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.bilm_frozen):
            with record_function(PHASES["char_cnn"]):
                # A static step's shapes are fixed; an eager step on the CPU, where reading the
                # longest token back costs nothing, convolves only the positions that count.
                static = batch.char_ids.is_cuda or compiling()
                vectors = self.bilm.token_encoder(batch.char_ids, all_positions=static)
            with record_function(PHASES["lstm"]):
                tops, finals = self._window_directions(vectors, batch.index, states, drop)
        with record_function(PHASES["softmax"]):
            tops = [nn.functional.dropout(top, drop, self.training).flatten(0, 1) for top in tops]
            hidden, targets = torch.cat(tops), batch.targets.flatten()
            nll = self._score(hidden, targets, n_samples, generator)
        return nll.view(2, -1).sum(1), BiLMStates(*finals)

    def _window_directions(
        self, vectors: torch.Tensor, index: torch.Tensor, states: Optional[BiLMStates], dropout: float
    ) -> Tuple[List[torch.Tensor], List[list]]:
        """Both LSTM stacks over their windows (``index[k]``: the rows of ``vectors`` at each
        position of direction k) from the carried ``states``: the top layers (B, T, dim) and
        each direction's final states, detached. On the CPU with two threads and no autocast
        (eager, float32) the directions run side by side on threads (``_how``), their dropout
        masks drawn first, in the order the directions one after the other (and a compiled step)
        draw them: the same numbers either way. On CUDA streams the host draws them in that
        order anyway."""
        lstms = (self.bilm.forward_lstm, self.bilm.backward_lstm)
        starts = (None, None) if states is None else (states.forward, states.backward)
        finals: List[list] = [[], []]
        # Masks in bf16 or fp16 (autocast) are not known to draw dropout's numbers: one after
        # the other there.
        how = self._how(vectors)
        if how == "threads" and get_precision(self.precision).autocast_dtype is not None:
            how = "sequential"
        masks: List[Optional[List[torch.Tensor]]] = [None, None]
        if how == "threads" and dropout and self.training:
            rows, steps = index.shape[1:]
            masks = [window_dropout_masks(lstm, rows, steps, vectors.shape[1], dropout, vectors) for lstm in lstms]

        def run(k: int):
            def direction(x: torch.Tensor) -> torch.Tensor:
                top, final = lstms[k].forward_windows(
                    x[index[k]], starts[k], dropout, masks[k], wavefront=self.lstm_wavefront, fused_cell=self.fused_cell
                )
                finals[k] = [(h.detach(), c.detach()) for h, c in final]
                return top

            return direction

        return self._run_directions([run(0), run(1)], vectors, how), finals

    def _score(
        self,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        n_samples: Optional[int],
        generator: Optional[torch.Generator],
    ) -> torch.Tensor:
        if n_samples:
            return self.softmax.sampled_nll(hidden, targets, n_samples, generator)
        return self.softmax.full_nll(hidden, targets)

    def _nll(
        self, batch: LMBatch, n_samples: Optional[int], generator: Optional[torch.Generator]
    ) -> torch.Tensor:
        lengths = batch.lengths
        width = batch.token_index.shape[1]
        positions = torch.arange(width, device=lengths.device)[None, :]
        drop = self.dropout if self.training else 0.0
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.bilm_frozen):
            with record_function(PHASES["char_cnn"]):
                vectors = self.bilm.token_encoder(batch.unique_char_ids)
            with record_function(PHASES["lstm"]):
                tops = self._directions(DistinctInputs(vectors, batch.token_index), lengths, drop)
        with record_function(PHASES["softmax"]):
            forward_top = nn.functional.dropout(tops[0], drop, self.training)
            backward_top = nn.functional.dropout(tops[1], drop, self.training)
            # forward: position t < length - 1 predicts t + 1; backward: 1 <= t < length
            # predicts t - 1
            predicts = (positions < lengths[:, None] - 1)[:, : width - 1]
            hidden = torch.cat([forward_top[:, :-1][predicts], backward_top[:, 1:][predicts]])
            targets = torch.cat([batch.targets[:, 1:][predicts], batch.targets[:, :-1][predicts]])
            nll = self._score(hidden, targets, n_samples, generator)
        n = int(predicts.sum())
        return torch.stack([nll[:n].sum(), nll[n:].sum()])

    def _directions(
        self, distinct: DistinctInputs, lengths: torch.Tensor, dropout: float
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The top layers (batch, T, dim) of the forward and the backward LSTM stacks over the
        distinct tokens' vectors. Each direction's dropout masks come from a generator of its
        own (seeded from torch's), so that the numbers are the same whether the directions run
        one after the other or side by side: on the CPU with two or more threads each direction
        runs forward and backward on a thread of its own (``_how``), where PyTorch would split
        each small op of the per-step loop over its threads."""
        mask = length_mask(lengths, distinct.index.shape[1])
        tokens = scatter_tokens(distinct, mask)
        generators = [None, None]
        if dropout and self.training:
            seeds = torch.randint(2**62, (2,)).tolist()
            generators = [torch.Generator().manual_seed(seed) for seed in seeds]
        lstms = (self.bilm.forward_lstm, self.bilm.backward_lstm)
        runs = [
            lambda x, lstm=lstm, g=g: lstm(x, lengths, None, dropout, distinct, g)[0][-1]
            for lstm, g in zip(lstms, generators)
        ]
        forward_top, backward_top = self._run_directions(runs, tokens, self._how(tokens))
        return forward_top, backward_top

    def _how(self, x: torch.Tensor) -> str:
        """How the two directions run on ``x`` (``nn/side_by_side.py``): on threads where the
        CPU has two or more, on two CUDA streams where ``directions_on_streams``, else one after
        the other; all three give the same numbers."""
        if compiling():  # (torch.get_num_threads would break the traced graph)
            return "sequential"
        return how_to_run(x.device, torch.get_num_threads(), self.directions_on_streams)

    def _run_directions(self, runs: Sequence, x: torch.Tensor, how: str) -> List[torch.Tensor]:
        """``runs[0](x)`` and ``runs[1](x)``, the forward and the backward stack's, run ``how``."""
        lstms = (self.bilm.forward_lstm, self.bilm.backward_lstm)
        params = [list(lstm.parameters()) for lstm in lstms]
        precision, device = self.precision, x.device
        return run_side_by_side_of(
            runs, x, how, params, lambda: precision_context(precision, device), one_thread_each=True
        )


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
