"""Invariants of the losses and advantages (pure torch, milliseconds)."""

from __future__ import annotations

import math

import pytest
import torch

from trainer.losses import (
    POLICY_LOSSES,
    group_advantages,
    kl_k3,
    masked_mean,
    opd_advantages,
    ppo_clip_loss,
    running_baseline_advantages,
    sft_loss,
    tis_weights,
)


def _logp(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return -torch.rand(*shape, generator=generator) * 3.0


def _mask(B: int, T: int) -> torch.Tensor:
    mask = torch.ones(B, T)
    mask[0, -2:] = 0.0  # padding on the first row
    return mask


def _grad_of_loss(ratio: float, advantage: float, **kwargs: float) -> float:
    old = torch.tensor([[-1.0]])
    logp = (old + math.log(ratio)).requires_grad_()
    loss, _ = ppo_clip_loss(logp, old, torch.tensor([[advantage]]), torch.ones(1, 1), **kwargs)
    loss.backward()
    assert logp.grad is not None
    return float(logp.grad)


@pytest.mark.parametrize("name", list(POLICY_LOSSES))
def test_policy_loss_is_zero_when_advantages_are_zero(name: str) -> None:
    logp = _logp(3, 6).requires_grad_()
    old = _logp(3, 6, seed=1)
    loss, clip_fraction = POLICY_LOSSES[name](logp, old, torch.zeros(3, 6), _mask(3, 6))
    loss.backward()
    assert loss.item() == 0.0
    assert clip_fraction.item() == 0.0
    assert logp.grad is not None and torch.all(logp.grad == 0)


@pytest.mark.parametrize("name", list(POLICY_LOSSES))
def test_policy_gradient_at_ratio_one_is_minus_advantage_over_valid_tokens(name: str) -> None:
    logp = _logp(2, 4).requires_grad_()
    advantages = torch.tensor([[1.0] * 4, [-2.0] * 4])
    mask = _mask(2, 4)
    POLICY_LOSSES[name](logp, logp.detach(), advantages, mask)[0].backward()
    assert torch.allclose(logp.grad, -advantages * mask / mask.sum())


def test_ppo_clip_loss_at_ratio_one_is_minus_the_mean_advantage() -> None:
    logp = _logp(2, 4)
    advantages = torch.tensor([[1.0] * 4, [-2.0] * 4])
    loss, _ = ppo_clip_loss(logp, logp, advantages, torch.ones(2, 4))
    assert loss.item() == pytest.approx(0.5)


@pytest.mark.parametrize("ratio", [1.29, 1.5, 3.0])
def test_positive_advantage_gradient_vanishes_above_1_plus_clip_high(ratio: float) -> None:
    assert _grad_of_loss(ratio, advantage=1.0) == 0.0


@pytest.mark.parametrize("ratio", [1.0, 1.1, 1.27, 0.5])
def test_positive_advantage_gradient_survives_below_1_plus_clip_high(ratio: float) -> None:
    assert _grad_of_loss(ratio, advantage=1.0) < 0.0  # descent raises logp


@pytest.mark.parametrize("ratio", [0.79, 0.5, 0.1])
def test_negative_advantage_gradient_vanishes_below_1_minus_clip_low(ratio: float) -> None:
    assert _grad_of_loss(ratio, advantage=-1.0) == 0.0


@pytest.mark.parametrize("ratio", [0.81, 1.0, 1.5, 4.0])
def test_negative_advantage_gradient_survives_above_1_minus_clip_low(ratio: float) -> None:
    assert _grad_of_loss(ratio, advantage=-1.0) > 0.0  # descent lowers logp


def test_ratio_cap_bounds_the_loss_of_a_negative_advantage() -> None:
    old = torch.tensor([[-3.0]])
    logp = torch.tensor([[0.0]])  # ratio e^3 ≈ 20
    uncapped, _ = ppo_clip_loss(logp, old, torch.tensor([[-1.0]]), torch.ones(1, 1))
    capped, _ = ppo_clip_loss(logp, old, torch.tensor([[-1.0]]), torch.ones(1, 1), ratio_cap=2.0)
    assert uncapped.item() == pytest.approx(math.exp(3.0))
    assert capped.item() == pytest.approx(2.0)


def test_clip_fraction_counts_only_tokens_whose_gradient_was_clipped() -> None:
    old = torch.zeros(1, 5)
    ratios = torch.tensor([[1.5, 1.5, 0.5, 0.5, 1.0]])
    advantages = torch.tensor([[1.0, -1.0, -1.0, 1.0, 1.0]])
    # token 0: high clip with A>0 (counted); 1: r>1 with A<0 (not); 2: low clip with A<0
    # (counted); 3: r<1 with A>0 (not); 4: r=1.
    _, fraction = ppo_clip_loss(ratios.log(), old, advantages, torch.ones(1, 5))
    assert fraction.item() == pytest.approx(2 / 5)
    mask = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0]])  # padding never counts
    _, fraction = ppo_clip_loss(ratios.log(), old, advantages, mask)
    assert fraction.item() == pytest.approx(1 / 3)


def test_importance_weights_scale_each_tokens_loss() -> None:
    logp = _logp(1, 3)
    advantages = torch.ones(1, 3)
    weights = torch.tensor([[0.5, 1.0, 2.0]])
    loss, _ = ppo_clip_loss(logp, logp, advantages, torch.ones(1, 3), is_weights_B_T=weights)
    assert loss.item() == pytest.approx(-(0.5 + 1.0 + 2.0) / 3)


def test_opd_advantage_is_zero_when_teacher_equals_student() -> None:
    logp = _logp(2, 5)
    assert torch.all(opd_advantages(logp, logp, torch.ones(2, 5)) == 0)


def test_opd_advantage_is_teacher_minus_old_on_valid_tokens_and_zero_on_padding() -> None:
    teacher, old, mask = _logp(2, 5), _logp(2, 5, seed=3), _mask(2, 5)
    advantages = opd_advantages(teacher, old, mask)
    assert torch.allclose(advantages[mask.bool()], (teacher - old)[mask.bool()])
    assert torch.all(advantages[~mask.bool()] == 0)


def test_masked_mean_ignores_padding() -> None:
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    garbage = values.clone()
    garbage[~mask.bool()] = 1e6
    assert masked_mean(values, mask).item() == pytest.approx(2.5)
    assert masked_mean(garbage, mask).item() == pytest.approx(2.5)
    assert masked_mean(values, torch.zeros(2, 3)).item() == 0.0


@pytest.mark.parametrize(
    "rewards", [[1.0, -1.0], [1.0, 1.0, -1.0, 0.0], [0.3, 0.9, -0.2, 0.5, 0.5], [1.0, 1.0]]
)
def test_group_advantages_sum_to_zero(rewards: list[float]) -> None:
    advantages = group_advantages(torch.tensor(rewards))
    assert advantages.sum().item() == pytest.approx(0.0, abs=1e-5)


def test_group_advantages_have_unit_spread_and_keep_the_order() -> None:
    advantages = group_advantages(torch.tensor([1.0, -1.0, 1.0, -1.0]))
    assert torch.allclose(advantages, torch.tensor([1.0, -1.0, 1.0, -1.0]), atol=1e-5)


def test_running_baseline_compares_each_reward_with_the_baseline_before_it() -> None:
    advantages, baseline = running_baseline_advantages(torch.tensor([1.0, 1.0]), 0.0, 0.5)
    assert advantages.tolist() == [1.0, 0.5]
    assert baseline == pytest.approx(0.75)


def test_reverse_kl_k3_is_zero_for_identical_logprobs() -> None:
    logp = _logp(3, 7)
    assert kl_k3(logp, logp, _mask(3, 7)).item() == 0.0


def test_reverse_kl_k3_is_positive_when_logprobs_differ() -> None:
    assert kl_k3(_logp(3, 7), _logp(3, 7, seed=5), _mask(3, 7)).item() > 0.0


def test_sft_loss_is_the_mean_negative_log_likelihood_of_valid_tokens() -> None:
    logp = torch.tensor([[-1.0, -3.0, -100.0]])
    assert sft_loss(logp, torch.tensor([[1.0, 1.0, 0.0]])).item() == pytest.approx(2.0)


def test_tis_weights_are_the_probability_ratio_capped_and_detached() -> None:
    trainer = torch.tensor([[-1.0, -1.0, -1.0]], requires_grad=True)
    sampler = torch.tensor([[-1.0, -1.5, -5.0]])
    weights = tis_weights(trainer, sampler, cap=2.0)
    assert torch.allclose(weights, torch.tensor([[1.0, math.exp(0.5), 2.0]]))
    assert not weights.requires_grad
