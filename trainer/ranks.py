"""Several processes computing one update: which rank this is, and the two reductions that
keep their copies of the adapter identical (gradients summed, metric totals reduced).

No DDP wrapper: the adapter is tiny, so one all-reduce of its flattened gradients per step is
simpler than hooking every backward pass. ``trainer.distributed`` launches the processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    """This process's place among the processes sharing one update."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def current(cls) -> World:
        """torch.distributed's rank and size when a process group is up, else one process."""
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()


def sum_gradients(params: list[torch.nn.Parameter]) -> None:
    """Sum the parameters' gradients over all ranks, in one all-reduce of a flat buffer.

    A rank with no micro-batch this step has no gradients; it contributes zeros.
    """
    flat = torch.cat(
        [
            p.grad.reshape(-1) if p.grad is not None else torch.zeros_like(p).reshape(-1)
            for p in params
        ]
    )
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    for param, grad in zip(params, flat.split([p.numel() for p in params]), strict=True):
        param.grad = grad.view_as(param)


def reduce_across(
    values: list[float], device: torch.device, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM
) -> list[float]:
    """Python floats summed (or reduced with ``op``) over all ranks, in float64 like floats."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=op)
    return tensor.tolist()
