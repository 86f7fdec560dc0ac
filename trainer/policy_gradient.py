"""The policy-gradient half of an update, one micro-batch at a time.

``prepare_chunk`` collates a micro-batch once per update and computes what stays fixed for it
(the hinted teacher's log-probs, the base model's when a KL penalty is on); on every step
``batch_logprobs`` scores it under the current policy and ``policy_gradient_terms`` turns those
log-probs into the algorithm's policy loss (``trainer.algorithms`` names it,
``trainer.losses.POLICY_LOSSES`` holds it), the k3 KL and the clip fraction. Scoring and loss
are apart so that several people's chunks can be scored in one forward pass
(``trainer.multi_person``) and each chunk's loss still computed on its own. Step 0's log-probs
are the old policy's, so the advantages are fixed there, and ``logprob_gap`` compares them with
the sampler's.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from trainer.advantages import token_advantages
from trainer.algorithms import algorithm_get
from trainer.batch import Batch, Sample, collate, move_targets
from trainer.config import UpdateConfig
from trainer.losses import POLICY_LOSSES, kl_k3, tis_weights
from trainer.policy import adapter_disabled, token_logprobs
from trainer.ranks import World, reduce_across


@dataclass
class Chunk:
    """One micro-batch of policy-gradient rows and what step 0 learns about it."""

    batch: Batch
    reward_adv_B: Tensor
    uses_rl_B: Tensor
    uses_opd_B: Tensor
    teacher_logp_B_T: Tensor
    ref_logp_B_T: Tensor | None = None
    trainer_old_logp_B_T: Tensor | None = None
    advantages_B_T: Tensor | None = None


def prepare_chunk(
    model: torch.nn.Module,
    config: UpdateConfig,
    samples: list[Sample],
    reward_adv: list[float],
    *,
    use_rl: bool,
    use_opd: bool,
    pad_id: int,
    device: torch.device,
) -> Chunk:
    """Collate a micro-batch and compute what stays fixed for the update (teacher, reference)."""
    batch = collate(
        [s.prompt_token_ids for s in samples],
        [s.response_token_ids for s in samples],
        pad_id=pad_id,
        target_logprobs=[s.sampler_logprobs for s in samples],
        temperatures=[s.temperature for s in samples],
    ).to(device)
    uses_rl_B = torch.tensor([use_rl and s.reward is not None for s in samples], device=device)
    uses_opd_B = torch.tensor(
        [(use_opd or s.distils_context) and s.hint is not None for s in samples], device=device
    )
    teacher_logp_B_T = torch.zeros_like(batch.target_logp_B_T)
    for mode in ("base", "policy"):
        rows_B = uses_opd_B & torch.tensor(
            [teacher_of(config, s) == mode for s in samples], device=device
        )
        if bool(rows_B.any()):
            hinted = [s for s, row in zip(samples, rows_B.tolist(), strict=True) if row]
            teacher_logp_B_T[rows_B] = _teacher_logprobs(
                model, mode, hinted, batch.target_mask_B_T[rows_B], pad_id=pad_id, device=device
            )
    distilled_B = torch.tensor([s.distils_context for s in samples], device=device)
    if bool(distilled_B.any()):
        # Sampled with the memories in the prompt: the student's own log-probs without them are
        # the old policy's (the importance weight is 1, the advantage teacher − student).
        student_B_T = score(model, batch)
        batch.target_logp_B_T[distilled_B] = student_B_T[distilled_B]
    chunk = Chunk(
        batch, torch.tensor(reward_adv, device=device), uses_rl_B, uses_opd_B, teacher_logp_B_T
    )
    if config.kl_coef > 0:
        with adapter_disabled(model):
            chunk.ref_logp_B_T = score(model, batch)
    if config.lora_dropout > 0:
        # With dropout on, step 0's forward pass is not the old policy: score it once without.
        chunk.trainer_old_logp_B_T = score(model, batch)
    return chunk


def teacher_of(config: UpdateConfig, sample: Sample) -> str:
    """Which model teaches ``sample``: memory samples have a teacher setting of their own."""
    return config.memory_teacher if sample.distils_context else config.teacher


def _teacher_logprobs(
    model: torch.nn.Module,
    mode: str,
    hinted: list[Sample],
    student_mask_H_T: Tensor,
    *,
    pad_id: int,
    device: torch.device,
) -> Tensor:
    """The teacher's log-probs of the hinted rows' response tokens, placed where the student's
    prompt puts them: the base (adapter off) or the policy, each reading its longer prompt."""
    teacher = collate(
        [list(s.teacher_prompt_token_ids or []) for s in hinted],
        [s.response_token_ids for s in hinted],
        pad_id=pad_id,
        temperatures=[s.temperature for s in hinted],
    ).to(device)
    with adapter_disabled(model) if mode == "base" else contextlib.nullcontext():
        logp_H_S = token_logprobs(
            model,
            teacher.input_ids_B_T,
            teacher.attention_mask_B_T,
            teacher.target_mask_B_T,
            teacher.temperature_B,
        )
    return move_targets(logp_H_S, teacher.target_mask_B_T, student_mask_H_T)


def batch_logprobs(model: torch.nn.Module, batch: Batch) -> Tensor:
    """The batch's target tokens scored under the current policy, at each row's temperature:
    (B, T), with gradients when they are on."""
    return token_logprobs(
        model,
        batch.input_ids_B_T,
        batch.attention_mask_B_T,
        batch.target_mask_B_T,
        batch.temperature_B,
    )


def policy_gradient_terms(
    config: UpdateConfig, chunk: Chunk, logp_B_T: Tensor, *, first_step: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """(PPO-clip loss, k3 KL to base, clip fraction) of one micro-batch from its log-probs
    under the current policy (``batch_logprobs``); fills step-0 state."""
    batch = chunk.batch
    mask_B_T = batch.target_mask_B_T
    if chunk.trainer_old_logp_B_T is None:
        chunk.trainer_old_logp_B_T = logp_B_T.detach()
    trainer_old_B_T = chunk.trainer_old_logp_B_T
    recompute = config.old_logp_source == "recompute"
    old_logp_B_T = trainer_old_B_T if recompute else batch.target_logp_B_T
    if first_step or chunk.advantages_B_T is None:
        chunk.advantages_B_T = token_advantages(
            config,
            chunk.reward_adv_B,
            chunk.teacher_logp_B_T,
            old_logp_B_T,
            mask_B_T,
            uses_rl_B=chunk.uses_rl_B,
            uses_opd_B=chunk.uses_opd_B,
        )
    policy_loss = POLICY_LOSSES[algorithm_get(config.algorithm).loss]
    pg, clip_fraction = policy_loss(
        logp_B_T,
        old_logp_B_T,
        chunk.advantages_B_T,
        mask_B_T,
        config.clip_low,
        config.clip_high,
        is_weights_B_T=tis_weights(trainer_old_B_T, batch.target_logp_B_T, config.tis_cap)
        if recompute
        else None,
        ratio_cap=None if recompute else config.tis_cap,
    )
    kl = torch.zeros(())
    if chunk.ref_logp_B_T is not None:
        kl = kl_k3(logp_B_T, chunk.ref_logp_B_T, mask_B_T)
    return pg, kl, clip_fraction


def score(model: torch.nn.Module, batch: Batch) -> Tensor:
    with torch.no_grad():
        return batch_logprobs(model, batch)


def logprob_gap(chunks: list[Chunk], world: World, device: torch.device) -> dict[str, float]:
    """Mean and max |trainer old log-prob − sampler log-prob| per response token, all ranks."""
    gaps = [
        (c.trainer_old_logp_B_T - c.batch.target_logp_B_T).abs()[c.batch.target_mask_B_T.bool()]
        for c in chunks
        if c.trainer_old_logp_B_T is not None
    ]
    # Sum and count rather than a mean, so ranks holding different token counts combine exactly.
    all_gaps = torch.cat(gaps) if gaps else torch.zeros(0, device=device)
    total, count = float(all_gaps.sum()), float(all_gaps.numel())
    largest = float(all_gaps.max()) if count else -math.inf
    if world.world_size > 1:
        total, count = reduce_across([total, count], device)
        (largest,) = reduce_across([largest], device, op=dist.ReduceOp.MAX)
    if not count:
        return {"logprob_gap_mean": math.nan, "logprob_gap_max": math.nan}
    return {"logprob_gap_mean": total / count, "logprob_gap_max": largest}
