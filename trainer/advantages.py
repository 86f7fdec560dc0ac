"""Advantages of a batch: from rewards (GRPO groups, running or batch-mean baseline) and per token.

Pure functions over plain samples and tensors; ``run_update`` calls them, the tests call them
directly.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer.batch import Sample
from trainer.config import UpdateConfig
from trainer.losses import group_advantages, opd_advantages, running_baseline_advantages


def reward_advantages(config: UpdateConfig, samples: list[Sample]) -> tuple[list[float], float]:
    """Advantage from the reward for each sample (0 without a reward) and the new baseline."""
    advantages = [0.0] * len(samples)
    groups: dict[str, list[int]] = {}
    for index, sample in enumerate(samples):
        if sample.reward is not None and sample.group_id is not None:
            groups.setdefault(sample.group_id, []).append(index)
    grouped = {i for members in groups.values() if len(members) >= 2 for i in members}
    for members in groups.values():
        if len(members) >= 2:
            rewards_G = torch.tensor([float(samples[i].reward) for i in members])  # type: ignore[arg-type]
            for i, adv in zip(
                members, group_advantages(rewards_G, config.group_eps).tolist(), strict=True
            ):
                advantages[i] = adv
    single = [i for i, s in enumerate(samples) if s.reward is not None and i not in grouped]
    rewards_B = torch.tensor([float(samples[i].reward) for i in single])  # type: ignore[arg-type]
    baseline = config.initial_baseline
    if config.batch_baseline and single:
        rewards_B = rewards_B - rewards_B.mean()
    elif config.use_running_baseline and single:
        rewards_B, baseline = running_baseline_advantages(
            rewards_B, baseline, config.baseline_momentum
        )
    for i, adv in zip(single, rewards_B.tolist(), strict=True):
        advantages[i] = adv
    return advantages, baseline


def token_advantages(
    config: UpdateConfig,
    reward_adv_B: Tensor,
    teacher_logp_B_T: Tensor,
    old_logp_B_T: Tensor,
    mask_B_T: Tensor,
    *,
    uses_rl_B: Tensor,
    uses_opd_B: Tensor,
) -> Tensor:
    """A_t = w_rl·reward_adv (broadcast over the response) + w_opd·(teacher_t − old_t).

    Each term only on rows that carry its signal (uses_rl_B, uses_opd_B), 0 on padding.
    """
    rl_B_T = (reward_adv_B * uses_rl_B)[:, None] * mask_B_T
    opd_B_T = opd_advantages(teacher_logp_B_T, old_logp_B_T, mask_B_T) * uses_opd_B[:, None]
    return config.w_rl * rl_B_T + config.w_opd * opd_B_T
