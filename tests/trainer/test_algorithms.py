"""The algorithm registry is the one list of algorithms: everything else derives from it."""

from __future__ import annotations

import re

import pytest

from trainer import losses
from trainer.algorithms import ALGORITHMS, SAMPLE_KINDS, Algorithm, algorithm_get
from trainer.config import UpdateConfig, config_from_dict


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_config_accepts_every_registered_algorithm(name: str) -> None:
    assert UpdateConfig(algorithm=name).algorithm == name


def test_config_refuses_an_unregistered_algorithm_and_names_the_known_ones() -> None:
    known = re.escape(", ".join(ALGORITHMS))
    with pytest.raises(ValueError, match=f"unknown algorithm 'no-such' \\(known: {known}\\)"):
        config_from_dict({"algorithm": "no-such"})


def test_the_three_signal_mixes_use_what_their_names_say() -> None:
    """rl trains the reward and not the hint, opd the hint and not the reward, combined both."""
    rl, opd, combined = (algorithm_get(name) for name in ("rl", "opd", "combined"))
    assert (rl.uses_reward, rl.uses_hint) == (True, False)
    assert (opd.uses_reward, opd.uses_hint) == (False, True)
    assert (combined.uses_reward, combined.uses_hint) == (True, True)


def test_every_algorithm_names_a_loss_that_exists_and_known_sample_kinds() -> None:
    for algorithm in ALGORITHMS.values():
        assert algorithm.loss in losses.POLICY_LOSSES
        assert set(algorithm.sample_kinds) <= set(SAMPLE_KINDS)
    with pytest.raises(ValueError, match="unknown sample kinds"):
        Algorithm("dpo", False, False, ("pair",), "ppo_clip_loss", ())


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_step_columns_put_step_and_loss_first_and_throughput_last(name: str) -> None:
    columns = ALGORITHMS[name].step_columns
    assert columns[:2] == ("step", "loss") and columns[-1] == "seconds"
    assert columns[2 : 2 + len(ALGORITHMS[name].step_metrics)] == ALGORITHMS[name].step_metrics


@pytest.mark.parametrize(
    ("name", "kind", "hint", "correction", "unused"),
    [
        ("opd", "rl", False, False, True),  # a thumb alone: nothing for distillation
        ("opd", "combined", False, True, False),  # a correction is trained by every algorithm
        ("opd", "opd", True, False, False),
        ("rl", "opd", True, False, True),  # a hint alone: no reward for RL
        ("rl", "opd", True, True, False),
        ("rl", "rl", False, False, False),
        ("combined", "rl", False, False, False),
        ("combined", "opd", True, False, False),
    ],
)
def test_unused_reason_names_exactly_the_samples_the_claim_leaves_ready(
    name, kind, hint, correction, unused
) -> None:
    reason = ALGORITHMS[name].unused_reason(kind=kind, has_hint=hint, has_correction=correction)
    assert bool(reason) is unused
    if unused:
        assert name in reason and "kept for" in reason


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_algorithm_trains_corrections_and_leaves_only_the_signal_it_does_not_use(
    name: str,
) -> None:
    algorithm = ALGORITHMS[name]
    for kind in SAMPLE_KINDS:
        assert algorithm.unused_reason(kind=kind, has_hint=False, has_correction=True) == ""
    thumb = algorithm.unused_reason(kind="rl", has_hint=False, has_correction=False)
    hint = algorithm.unused_reason(kind="opd", has_hint=True, has_correction=False)
    assert (thumb == "") is algorithm.uses_reward
    assert (hint == "") is algorithm.uses_hint
