"""Data-parallel setup from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK), for pretraining
and ``embed``. A plain process initialises nothing; under torchrun, one rank included (so
``--nproc-per-node 1`` runs the code path of many), NCCL on GPUs and Gloo on CPUs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, List, Tuple

import torch
import torch.distributed as dist


def env_rank() -> int:
    """This process's rank under torchrun (0 in a single process), before any process group."""
    return int(os.environ.get("RANK", "0"))


def under_torchrun() -> bool:
    """Whether torchrun (or another launcher of its env:// protocol) started this process."""
    return all(key in os.environ for key in ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


@dataclass
class DistributedContext:
    rank: int
    world_size: int
    device: torch.device
    #: Started by torchrun: a process group exists and the collectives run, also for one rank.
    distributed: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls, gpu_id: int = -1) -> "DistributedContext":
        """Read torchrun's variables; ``gpu_id`` >= 0: a GPU (each rank its LOCAL_RANK's)."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        rank = env_rank()
        use_gpu = gpu_id >= 0
        if use_gpu and not torch.cuda.is_available():
            raise RuntimeError(
                f"--gpu-id {gpu_id} was given but PyTorch sees no CUDA GPU "
                f"(torch {torch.__version__}); use --gpu-id -1 for the CPU"
            )
        launched = under_torchrun()
        gpu = int(os.environ.get("LOCAL_RANK", "0")) if launched else gpu_id  # under torchrun: the local rank's
        device = torch.device("cuda", gpu) if use_gpu else torch.device("cpu")
        if use_gpu:
            torch.cuda.set_device(device)
        if launched and not dist.is_initialized():
            dist.init_process_group(backend="nccl" if use_gpu else "gloo")
        return cls(rank, world_size, device, launched)

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def all_reduce_sum_async(self, tensor: torch.Tensor) -> Callable[[], None]:
        """Start an in-place sum over the ranks; returns the wait (on the device's stream)."""
        if not self.distributed:
            return lambda: None
        work = dist.all_reduce(tensor, op=dist.ReduceOp.SUM, async_op=True)
        return work.wait

    def gather_rows(
        self, ids: torch.Tensor, values: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Every rank's row-sparse gradients (ids (n,), values (n, d)), padded to the largest and
        values divided by the world size, as DDP averages dense ones."""
        if not self.distributed:
            return ids, values
        counts = [torch.zeros(1, dtype=torch.long, device=ids.device) for _ in range(self.world_size)]
        dist.all_gather(counts, torch.tensor([ids.shape[0]], device=ids.device))
        sizes = [int(c) for c in counts]
        width = max(sizes)
        padded_ids = ids.new_zeros(width)
        padded_ids[: ids.shape[0]] = ids
        padded_values = values.new_zeros((width,) + values.shape[1:])
        padded_values[: values.shape[0]] = values
        all_ids = [torch.empty_like(padded_ids) for _ in range(self.world_size)]
        all_values = [torch.empty_like(padded_values) for _ in range(self.world_size)]
        dist.all_gather(all_ids, padded_ids)
        dist.all_gather(all_values, padded_values)
        ids = torch.cat([chunk[:n] for chunk, n in zip(all_ids, sizes)])
        values = torch.cat([chunk[:n] for chunk, n in zip(all_values, sizes)])
        return ids, values / self.world_size

    def gather_objects(self, obj: Any) -> List[Any]:
        if not self.distributed:
            return [obj]
        out: List[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def shutdown(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()
