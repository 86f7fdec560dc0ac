"""AdamW's state along one lineage of adapters, saved next to each adapter it produced."""

from __future__ import annotations

from pathlib import Path

import torch

OPTIMIZER_STATE_FILE = "optimizer.pt"
"""AdamW's state, saved next to the adapter (vLLM ignores files it does not know)."""


def optimizer_state_load(
    optimizer: torch.optim.Optimizer, adapter_dir: str | Path | None, *, lr: float
) -> bool:
    """Continue the AdamW moments saved next to the adapter this update starts from.

    A new AdamW on every update makes each step's size almost independent of the signal (its
    first step is ±lr on every weight, whatever the gradient's size); along one lineage of
    adapters the moments carry over, so steps scale with how consistent the signal has been.
    The learning rate is this update's (a refused update's samples come back with a smaller
    one). False when there is nothing to continue: a new adapter, an adapter saved before
    this existed, or a state that does not fit (another rank or targets).
    """
    if adapter_dir is None:
        return False
    path = Path(adapter_dir) / OPTIMIZER_STATE_FILE
    if not path.is_file():
        return False
    device = optimizer.param_groups[0]["params"][0].device
    state = torch.load(path, map_location=device, weights_only=True)
    try:
        optimizer.load_state_dict(state)
    except (ValueError, KeyError):
        return False
    for group in optimizer.param_groups:
        group["lr"] = lr
    return True


def optimizer_steps(optimizer: torch.optim.Optimizer) -> int:
    """AdamW steps taken along this lineage (its bias correction counter)."""
    steps = [float(s["step"]) for s in optimizer.state.values() if "step" in s]
    return int(max(steps, default=0))
