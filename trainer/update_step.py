"""One person's optimizer step, from the log-probs on: the pieces both update paths share.

``trainer.update.run_update`` scores one person's micro-batches one forward pass at a time;
``trainer.multi_person.run_updates`` scores several people's rows in one pass, each row through
its own person's adapter. From the log-probs on, both run these functions per person: each
micro-batch's share of that person's loss and the figures it adds to their step totals, then
their gradient clipping, their AdamW step and their step's metrics. So the two paths compute the
same update, and a change to a loss or a metric is made once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from trainer.anchor import anchor_kl
from trainer.batch import Batch
from trainer.config import UpdateConfig
from trainer.losses import sft_loss
from trainer.optimizer_state import OPTIMIZER_STATE_FILE
from trainer.policy import peak_memory
from trainer.policy_gradient import Chunk, logprob_gap, policy_gradient_terms
from trainer.ranks import World

STEP_TOTALS = ("pg_loss", "kl", "mean_advantage", "clip_fraction", "sft_loss", "anchor_kl")


def new_totals() -> dict[str, float]:
    """A step's running totals, all zero."""
    return dict.fromkeys(STEP_TOTALS, 0.0)


def pg_chunk_loss(
    config: UpdateConfig,
    chunk: Chunk,
    logp_B_T: Tensor,
    totals: dict[str, float],
    *,
    pg_tokens: float,
    first_step: bool,
) -> Tensor:
    """The micro-batch's part of the step's loss, (policy loss + kl_coef·KL) × its share of the
    person's policy-gradient tokens; its figures are added to ``totals``."""
    share = float(chunk.batch.target_mask_B_T.sum()) / pg_tokens
    pg, kl, clip_fraction = policy_gradient_terms(config, chunk, logp_B_T, first_step=first_step)
    totals["pg_loss"] += float(pg.detach()) * share
    totals["kl"] += float(kl.detach()) * share
    totals["clip_fraction"] += float(clip_fraction) * share
    assert chunk.advantages_B_T is not None
    totals["mean_advantage"] += float(
        (chunk.advantages_B_T * chunk.batch.target_mask_B_T).sum() / pg_tokens
    )
    return (pg + config.kl_coef * kl) * share


def sft_batch_loss(
    config: UpdateConfig,
    batch: Batch,
    logp_B_T: Tensor,
    totals: dict[str, float],
    *,
    sft_tokens: float,
) -> Tensor:
    """The correction batch's part of the step's loss, sft_coef × its supervised loss × its
    share of the person's correction tokens; added to ``totals``."""
    share = float(batch.target_mask_B_T.sum()) / sft_tokens
    sft = sft_loss(logp_B_T, batch.target_mask_B_T) * share
    totals["sft_loss"] += float(sft.detach())
    return config.sft_coef * sft


def anchor_loss(
    config: UpdateConfig,
    base_logp_N_V: Tensor,
    policy_logp_N_V: Tensor,
    totals: dict[str, float],
    *,
    world_size: int = 1,
) -> Tensor:
    """anchor_coef × KL(base ‖ policy) on the anchor paragraphs. Every rank computes it in
    full and the gradients are summed, hence the division by the world's size."""
    drift = anchor_kl(base_logp_N_V, policy_logp_N_V)
    totals["anchor_kl"] += float(drift.detach()) / world_size
    return config.anchor_coef * drift / world_size


def optimizer_step(
    config: UpdateConfig,
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    totals: dict[str, float],
    *,
    chunks: list[Chunk],
    gap: dict[str, float],
    tokens: int,
    has_anchor: bool,
    world: World,
    step: int,
    started: float,
) -> dict[str, Any]:
    """Clip the person's gradients to their ``max_grad_norm``, take their AdamW step; the
    step's metrics. On step 0 ``gap`` is filled with the trainer–sampler log-prob gap."""
    device = params[0].device
    grad_norm = torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
    optimizer.step()
    if step == 0:
        gap.update(logprob_gap(chunks, world, device))
    seconds = time.perf_counter() - started
    loss = totals["pg_loss"] + config.kl_coef * totals["kl"]
    loss += config.sft_coef * totals["sft_loss"] + config.anchor_coef * totals["anchor_kl"]
    return {
        "step": step,
        "loss": loss,
        **totals,
        "kl": totals["kl"] if config.kl_coef > 0 else None,
        "anchor_kl": totals["anchor_kl"] if has_anchor else None,
        "grad_norm": float(grad_norm),
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_second": tokens / seconds,
        **gap,
        **peak_memory(device),
    }


def save_optimizer_state(optimizer: torch.optim.Optimizer, out_adapter_dir: str | Path) -> None:
    """AdamW's state next to the adapter it produced (``trainer.optimizer_state`` reads it)."""
    torch.save(optimizer.state_dict(), Path(out_adapter_dir) / OPTIMIZER_STATE_FILE)
