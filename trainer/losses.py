"""The learning loop's losses and advantages: pure torch, no model, no I/O.

Shapes are spelled in the names: ``_B_T`` is (batch, tokens), ``_G`` is one group of siblings,
``_B`` one value per sequence. Every per-token tensor comes with a ``mask_B_T`` that is 1 on
the response tokens being trained and 0 on prompt and padding.

Simplifications, on purpose:
- Every mean over tokens is a token-mean over the whole batch (DAPO, Yu et al. 2025), not a
  mean of per-sequence means, so a long answer is not down-weighted against a short one.
- Advantages are always per token (B, T). Binary RL broadcasts one reward over its sequence;
  on-policy distillation (OPD) gives each token its own teacher − student gap. One
  ``ppo_clip_loss`` serves both, and the combined algorithm is just their weighted sum.
- No value function: the baseline is the group mean (GRPO) or a running mean of rewards.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def masked_mean(values_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """Token-mean over valid tokens: sum(values · mask) / max(sum(mask), 1).

    Padding never counts, whatever value it holds; an all-padding batch gives 0, not NaN.
    """
    mask_B_T = mask_B_T.to(values_B_T.dtype)
    return (values_B_T * mask_B_T).sum() / mask_B_T.sum().clamp(min=1.0)


def ppo_clip_loss(
    logp_B_T: Tensor,
    old_logp_B_T: Tensor,
    advantages_B_T: Tensor,
    mask_B_T: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    *,
    is_weights_B_T: Tensor | None = None,
    ratio_cap: float | None = None,
) -> tuple[Tensor, Tensor]:
    """PPO clipped surrogate with asymmetric bounds (DAPO's clip-higher), token-mean.

    r_t = exp(logp_t − old_logp_t)
    L   = mean_t[ w_t · −min(r_t·A_t, clip(r_t, 1 − clip_low, 1 + clip_high)·A_t) ]

    ``is_weights_B_T`` (w_t, default 1) are detached importance weights that correct for the
    sampler not being the trainer (see ``tis_weights``). ``ratio_cap`` bounds r_t from above
    before the surrogate (dual-clip PPO, Ye et al. 2020): without it a token with A_t < 0 and a
    large ratio has an unbounded loss. Returns (loss, clip_fraction), the fraction of valid
    tokens whose gradient the clip removed (r above 1 + clip_high with A > 0, or below
    1 − clip_low with A < 0).
    """
    ratio_B_T = torch.exp(logp_B_T - old_logp_B_T)
    if ratio_cap is not None:
        ratio_B_T = ratio_B_T.clamp(max=ratio_cap)
    clipped_B_T = ratio_B_T.clamp(1.0 - clip_low, 1.0 + clip_high)
    surrogate_B_T = -torch.min(ratio_B_T * advantages_B_T, clipped_B_T * advantages_B_T)
    if is_weights_B_T is not None:
        surrogate_B_T = surrogate_B_T * is_weights_B_T.detach()
    with torch.no_grad():
        clipped_high = (ratio_B_T > 1.0 + clip_high) & (advantages_B_T > 0)
        clipped_low = (ratio_B_T < 1.0 - clip_low) & (advantages_B_T < 0)
        clip_fraction = masked_mean((clipped_high | clipped_low).float(), mask_B_T)
    return masked_mean(surrogate_B_T, mask_B_T), clip_fraction


def opd_advantages(teacher_logp_B_T: Tensor, old_logp_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """On-policy distillation advantage: A_t = teacher_logp_t − old_logp_t on valid tokens, else 0.

    With PPO-clip this is a per-token reverse-KL step towards the teacher (the same model with
    the hint in its prompt): tokens the teacher finds likelier than the student are pushed up.
    """
    return torch.where(mask_B_T.bool(), teacher_logp_B_T - old_logp_B_T, 0.0).detach()


def group_advantages(rewards_G: Tensor, eps: float = 1e-6) -> Tensor:
    """GRPO advantage for siblings of one prompt: (r − mean(r)) / (std(r) + eps).

    The population std is used, so two siblings rewarded +1 and −1 get ±1 (up to eps). The
    result sums to zero: a group where every sibling got the same reward teaches nothing.
    """
    centred_G = rewards_G - rewards_G.mean()
    return centred_G / (rewards_G.std(unbiased=False) + eps)


def running_baseline_advantages(
    rewards_B: Tensor, baseline: float, momentum: float = 0.9
) -> tuple[Tensor, float]:
    """Reward minus a running baseline, in order: A_i = r_i − b_{i−1}, b_i = m·b_{i−1} + (1−m)·r_i.

    Each sample is compared with the baseline from before it, so its own reward is not part of
    it. Returns the advantages and the baseline after the last sample, for the next update.
    """
    advantages = []
    for reward in rewards_B.tolist():
        advantages.append(reward - baseline)
        baseline = momentum * baseline + (1.0 - momentum) * reward
    return torch.tensor(advantages, dtype=rewards_B.dtype), baseline


def kl_k3(logp_B_T: Tensor, ref_logp_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """Schulman's k3 estimator of KL(policy ‖ ref), token-mean over valid tokens.

    k3_t = exp(ref_t − logp_t) − (ref_t − logp_t) − 1, which is ≥ 0 for every token, 0 exactly
    when the two log-probs agree, and unbiased for KL when tokens are sampled from the policy.
    """
    delta_B_T = ref_logp_B_T - logp_B_T
    return masked_mean(torch.exp(delta_B_T) - delta_B_T - 1.0, mask_B_T)


def sft_loss(logp_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """Negative mean log-likelihood of the target tokens: −mean_t logp_t over valid tokens.

    Used on a user's correction (the answer they wrote), which the policy might never sample.
    """
    return -masked_mean(logp_B_T, mask_B_T)


def tis_weights(trainer_old_logp_B_T: Tensor, sampler_logp_B_T: Tensor, cap: float) -> Tensor:
    """Truncated importance weights w_t = min(exp(trainer_old_t − sampler_t), cap), detached.

    vLLM samples in bf16 (or another kernel path) and the trainer scores in fp32, so the
    distribution that drew the tokens is not the one the trainer calls "old". Weighting each
    token's loss by π_old/π_sampler corrects for that; the cap keeps a few tokens with a large
    mismatch from dominating the batch (TIS, Yao et al. 2025).
    """
    return torch.exp(trainer_old_logp_B_T - sampler_logp_B_T).clamp(max=cap).detach()


PolicyLoss = Callable[..., tuple[Tensor, Tensor]]
"""A policy loss: ``(logp_B_T, old_logp_B_T, advantages_B_T, mask_B_T, clip_low, clip_high, *,
is_weights_B_T, ratio_cap) -> (loss, clip_fraction)``, as ``ppo_clip_loss``; a loss without
clipping returns a zero fraction."""

POLICY_LOSSES: dict[str, PolicyLoss] = {"ppo_clip_loss": ppo_clip_loss}
"""The policy losses by the name ``trainer.algorithms.Algorithm.loss`` gives: what an update of
that algorithm runs (``trainer.policy_gradient``)."""
