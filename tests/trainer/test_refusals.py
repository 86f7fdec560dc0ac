"""trainer.refusals: the one rule for a refused update's samples (webapp and replay alike)."""

from __future__ import annotations

import doctest

import pytest

import bench.preferences
import trainer.refusals
from trainer.refusals import backed_off_lr, is_excluded


def test_doctests_hold() -> None:
    assert doctest.testmod(trainer.refusals).failed == 0
    assert doctest.testmod(bench.preferences).failed == 0


def test_samples_never_refused_train_at_the_configured_rate() -> None:
    assert backed_off_lr(1e-3, refusals=[0, 0, 0], factor=0.5) == 1e-3


@pytest.mark.parametrize("refusals", [1, 2, 3, 5])
def test_each_refusal_of_the_most_refused_sample_shrinks_the_step(refusals: int) -> None:
    lower = backed_off_lr(1e-3, refusals=[0, refusals], factor=0.5)
    assert lower == pytest.approx(1e-3 * 0.5**refusals)
    assert lower < backed_off_lr(1e-3, refusals=[0, refusals - 1], factor=0.5)


def test_a_sample_is_excluded_from_the_last_allowed_refusal_on() -> None:
    assert [is_excluded(n, max_refusals=3) for n in range(5)] == [False] * 3 + [True] * 2
