"""The algorithm registry is the one list of algorithms: everything else derives from it."""

from __future__ import annotations

import pytest

from trainer import losses
from trainer.advantages import ALGORITHM_SIGNALS
from trainer.algorithms import ALGORITHMS, SAMPLE_KINDS, Algorithm, algorithm_get
from trainer.config import UpdateConfig, config_from_dict


def test_config_accepts_exactly_the_registered_algorithms() -> None:
    for name in ALGORITHMS:
        assert UpdateConfig(algorithm=name).algorithm == name
    with pytest.raises(ValueError, match="unknown algorithm 'dpo' \\(known: rl, opd, combined\\)"):
        config_from_dict({"algorithm": "dpo"})


def test_signals_are_derived_from_the_registry() -> None:
    assert ALGORITHM_SIGNALS == {
        "rl": (True, False),
        "opd": (False, True),
        "combined": (True, True),
    }


def test_every_algorithm_names_a_loss_that_exists_and_known_sample_kinds() -> None:
    for algorithm in ALGORITHMS.values():
        assert algorithm.loss in losses.POLICY_LOSSES
        assert set(algorithm.sample_kinds) <= set(SAMPLE_KINDS)
    with pytest.raises(ValueError, match="unknown sample kinds"):
        Algorithm("dpo", False, False, ("pair",), "ppo_clip_loss", ())


def test_step_columns_put_step_and_loss_first() -> None:
    columns = algorithm_get("combined").step_columns
    assert columns[:3] == ("step", "loss", "pg_loss") and columns[-1] == "seconds"


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
