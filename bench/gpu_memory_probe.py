"""The largest micro-batch that fits on the GPU, and the GPU's peak memory: the third leg of
``bench/gpu_train_check.py``, which imports this with only torch and ``trainer`` around."""

from __future__ import annotations

import time
from typing import Any

import torch

from trainer.batch import collate
from trainer.policy import release_memory, token_logprobs


def gpu_peaks(device: torch.device) -> dict[str, float | None]:
    if device.type != "cuda":
        return {"peak_allocated_gib": None, "peak_reserved_gib": None}
    return {
        "peak_allocated_gib": torch.cuda.max_memory_allocated(device) / 2**30,
        "peak_reserved_gib": torch.cuda.max_memory_reserved(device) / 2**30,
    }


def reset_peaks(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def largest_micro_batch(
    model: Any, vocab: int, device: torch.device, *, start: int, limit: int, deadline: float
) -> dict[str, Any]:
    """Double the tokens of one forward + backward pass (1k-token rows) until it fails."""
    fits: list[dict[str, Any]] = []
    tokens, failed = start, None
    model.train()
    while tokens <= limit and time.monotonic() < deadline:
        rows, width = max(tokens // start, 1), min(tokens, start)
        ids = torch.randint(3, vocab, (rows, width))
        batch = collate([row[:8] for row in ids.tolist()], [row[8:] for row in ids.tolist()])
        batch = batch.to(device)
        reset_peaks(device)
        started = time.perf_counter()
        try:
            logp = token_logprobs(
                model, batch.input_ids_B_T, batch.attention_mask_B_T, batch.target_mask_B_T
            )
            logp.sum().backward()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            # Read before release_memory, which resets the peak counters.
            fit = {"tokens": tokens, "seconds": time.perf_counter() - started, **gpu_peaks(device)}
        except torch.OutOfMemoryError as exc:
            failed = {"tokens": tokens, "error": str(exc).splitlines()[0]}
            break
        finally:
            model.zero_grad(set_to_none=True)
            logp = None  # drop the graph before the next size
            release_memory(device)
        fits.append(fit)
        tokens *= 2
    model.eval()
    return {
        "largest_tokens": fits[-1]["tokens"] if fits else 0,
        "tried": fits,
        "first_failure": failed,
    }
