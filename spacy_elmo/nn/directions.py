"""The one engine that runs a biLM's two LSTM directions, for inference (``BiLM``, its runner's
threads and CUDA graphs) and for pretraining (``pretrain/model.py``): ``run_directions`` takes the
directions, their inputs (the distinct tokens' vectors and each direction's rows of them in its
reading order), how to run them (``nn/side_by_side.py``: one after the other, on threads, on CUDA
streams) and the dropout masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ContextManager, List, NamedTuple, Optional, Sequence, Tuple

import torch

from .lstm import DirectionalLSTM, DirectionOutputs, DistinctInputs, LSTMState, length_mask
from .side_by_side import run_side_by_side_of


@dataclass
class BiLMStates:
    """Final LSTM states of each batch row, per layer: (h, c) for each direction."""

    forward: List[LSTMState]
    backward: List[LSTMState]


class LSTMRun(NamedTuple):
    """How ``run_directions`` runs the LSTMs: ``how`` (``side_by_side.WAYS``) with ``shards`` of
    the rows per direction (threads at inference), ``fixed_shapes``, ``wavefront`` and
    ``fused_cell`` as ``DirectionalLSTM.forward`` takes them, each thread in ``context`` (the
    precision) and, where the caller owns its process, on one PyTorch thread."""

    how: str = "sequential"
    shards: int = 1
    fixed_shapes: bool = False
    wavefront: bool = False
    fused_cell: bool = False
    context: Optional[Callable[[], ContextManager]] = None
    one_thread_each: bool = False


def run_directions(
    lstms: Sequence[DirectionalLSTM],
    rows: torch.Tensor,
    index: torch.Tensor,
    lengths: Optional[torch.Tensor],
    states: Optional[BiLMStates] = None,
    masks: Optional[Sequence[Sequence[torch.Tensor]]] = None,
    run: LSTMRun = LSTMRun(),
) -> Tuple[DirectionOutputs, DirectionOutputs]:
    """Both directions' outputs, each in its reading order.

    Args:
        lstms: the forward and the backward direction (their parameters: ``DirectionalLSTM``).
        rows: (n_distinct, dim) the distinct tokens' vectors.
        index: (2, batch, T) each direction's rows of ``rows``, in its reading order.
        lengths: (batch,) each row's positions, or None: every position (windows).
        states: each direction's per-layer (h0, c0) of each row, or None for zeros.
        masks: each direction's per-layer dropout masks (``lstm.dropout_masks``), or None."""
    shards: List[Optional[torch.Tensor]] = [None]
    if run.shards > 1 and lengths is not None and masks is None and index.shape[1] > 1:
        shards = _balanced_shards(lengths, run.shards)
    each_states = (None, None) if states is None else (states.forward, states.backward)
    jobs: List[Callable[[torch.Tensor], DirectionOutputs]] = []
    for shard in shards:
        for k, lstm in enumerate(lstms):
            jobs.append(_job(lstm, k, index, lengths, each_states[k], None if masks is None else masks[k], shard, run))
    params = [list(lstms[k % 2].parameters()) for k in range(len(jobs))]
    results = run_side_by_side_of(jobs, rows, run.how, params, run.context, run.one_thread_each)
    if len(shards) == 1:
        return results[0], results[1]
    order = torch.argsort(torch.cat(shards))
    return tuple(_gather_shards(results[k::2], order) for k in (0, 1))


def _job(
    lstm: DirectionalLSTM,
    k: int,
    index: torch.Tensor,
    lengths: Optional[torch.Tensor],
    states: Optional[List[LSTMState]],
    masks: Optional[Sequence[torch.Tensor]],
    shard: Optional[torch.Tensor],
    run: LSTMRun,
) -> Callable[[torch.Tensor], DirectionOutputs]:
    """Direction ``k`` over its rows of ``shard`` (None: every row): rows -> its outputs."""
    if shard is not None:
        index, lengths = index[:, shard], lengths[shard]
        states = None if states is None else [(h[shard], c[shard]) for h, c in states]

    def job(rows: torch.Tensor) -> DirectionOutputs:
        inputs = rows[index[k]] if masks is not None else DistinctInputs(rows, index[k])
        if shard is not None:
            inputs = _distinct_rows_of(inputs, lengths)
        return lstm(inputs, lengths, states, masks, fixed_shapes=run.fixed_shapes, wavefront=run.wavefront,
                    fused_cell=run.fused_cell)  # fmt: skip

    return job


def _balanced_shards(lengths: torch.Tensor, n_shards: int) -> List[torch.Tensor]:
    """Row indices of at most ``n_shards`` shards with near-equal tokens (longest first, greedy)."""
    n_shards = min(n_shards, lengths.shape[0])
    loads = [0] * n_shards
    members: List[List[int]] = [[] for _ in range(n_shards)]
    lengths_list = lengths.tolist()
    for row in sorted(range(len(lengths_list)), key=lambda r: -lengths_list[r]):
        k = loads.index(min(loads))
        members[k].append(row)
        loads[k] += lengths_list[row]
    return [torch.tensor(sorted(m), dtype=torch.long, device=lengths.device) for m in members if m]


def _distinct_rows_of(inputs: DistinctInputs, lengths: torch.Tensor) -> DistinctInputs:
    """A shard's own distinct rows (its input products for the tokens it has only)."""
    mask = length_mask(lengths, inputs.index.shape[1])
    used, inverse = torch.unique(inputs.index[mask], return_inverse=True)
    shard_index = inputs.index.new_zeros(inputs.index.shape)
    shard_index[mask] = inverse
    return DistinctInputs(inputs.rows[used], shard_index)


def _gather_shards(pieces: Sequence[DirectionOutputs], order: torch.Tensor) -> DirectionOutputs:
    """One direction's per-shard outputs and final states -> the batch's, rows in batch order."""
    n_layers = len(pieces[0][0])
    outputs = [torch.cat([p[0][i] for p in pieces]).index_select(0, order) for i in range(n_layers)]
    states = [
        tuple(torch.cat([p[1][i][part] for p in pieces]).index_select(0, order) for part in (0, 1))
        for i in range(n_layers)
    ]
    return outputs, states
