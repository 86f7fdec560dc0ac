"""trainer.refusals: the one rule for a refused update's samples (webapp and replay alike)."""

from __future__ import annotations

import doctest

import pytest

import trainer.refusals
from trainer.refusals import backed_off_lr, is_excluded


def test_doctests_hold() -> None:
    result = doctest.testmod(trainer.refusals)
    assert result.attempted > 0 and result.failed == 0


def test_the_webapp_and_the_replay_share_the_defaults(settings) -> None:
    import bench.replay
    import bench.replay_options
    from trainer.claim import ClaimRules
    from trainer.gate import GateThresholds

    assert settings.TRAIN_REFUSAL_LR_FACTOR == trainer.refusals.REFUSAL_LR_FACTOR
    assert settings.TRAIN_MAX_REFUSALS == trainer.refusals.MAX_REFUSALS
    assert bench.replay.MAX_REFUSALS is trainer.refusals.MAX_REFUSALS
    rules, gate = ClaimRules(), GateThresholds()
    assert (settings.TRAIN_BATCH_SIZE, bench.replay_options.BATCH_SIZE) == (rules.batch_size,) * 2
    assert settings.GATE_FRESH_SAMPLES == rules.fresh
    assert settings.GATE_HOLDOUT_SAMPLES == rules.holdout
    assert (settings.GATE_MAX_KL, bench.replay_options.GATE_MAX_KL) == (gate.max_kl,) * 2


def test_samples_never_refused_train_at_the_configured_rate() -> None:
    assert backed_off_lr(1e-3, refusals=[0, 0, 0], factor=0.5) == 1e-3


@pytest.mark.parametrize("refusals", [1, 2, 3, 5])
def test_each_refusal_of_the_most_refused_sample_shrinks_the_step(refusals: int) -> None:
    lower = backed_off_lr(1e-3, refusals=[0, refusals], factor=0.5)
    assert lower == pytest.approx(1e-3 * 0.5**refusals)
    assert lower < backed_off_lr(1e-3, refusals=[0, refusals - 1], factor=0.5)


def test_a_sample_is_excluded_from_the_last_allowed_refusal_on() -> None:
    assert [is_excluded(n, max_refusals=3) for n in range(5)] == [False] * 3 + [True] * 2
