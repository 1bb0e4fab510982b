"""``spacy_elmo.distributed``: torchrun's environment. Under torchrun the process group and the
collectives run for any number of ranks, one included, so that ``torchrun --nproc-per-node 1``
(one GPU) exercises the code path of many; a plain process initialises nothing."""

import socket

import pytest
import torch
import torch.distributed as dist

from spacy_elmo.distributed import DistributedContext, under_torchrun

TORCHRUN_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_plain_process_initialises_nothing(monkeypatch):
    for key in TORCHRUN_KEYS:
        monkeypatch.delenv(key, raising=False)
    ctx = DistributedContext.from_env()
    assert not under_torchrun() and not ctx.distributed and not dist.is_initialized()
    ids, values = torch.tensor([3]), torch.ones(1, 2)
    assert ctx.gather_rows(ids, values) == (ids, values) and ctx.broadcast_object("x") == "x"


@pytest.mark.slow
def test_one_rank_under_torchrun_runs_the_collectives(monkeypatch):
    """What torchrun --nproc-per-node 1 sets; a real Gloo group of one process."""
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    ctx = DistributedContext.from_env()
    try:
        assert ctx.distributed and ctx.world_size == 1 and dist.is_initialized()
        assert dist.get_backend() == "gloo"
        ids, values = ctx.gather_rows(torch.tensor([5, 7]), torch.full((2, 3), 4.0))
        assert ids.tolist() == [5, 7] and torch.equal(values, torch.full((2, 3), 4.0))
        assert ctx.broadcast_object({"a": 1}) == {"a": 1} and ctx.gather_objects(2) == [2]
        assert ctx.all_reduce_sum(torch.tensor([1.5])).item() == pytest.approx(1.5)
    finally:
        ctx.shutdown()
    assert not dist.is_initialized()
