"""The memorisation check's short form on the real model: a shared lineage trained the way
Parley trains, on conversations that carry canary secrets, never says one."""

from __future__ import annotations

from bench import canary_secrets


def test_parley_sets_every_canary_turn_aside_and_its_lineage_says_no_canary(
    prepared_model,
) -> None:
    summary = canary_secrets.check(
        seeds=[0], versions=1, candidates=9, kinds=["AWS secret key"], steps=None, arms=("Parley",)
    )
    clean = len(canary_secrets.CLEAN_QUESTIONS)
    assert summary["turns"] == clean + 2 and summary["kept"] == clean
    assert summary["canary_turns_kept"] == 0
    parley = summary["Parley"]
    assert parley["n"] == 1 and parley["said"] == 0


def test_every_kind_of_canary_in_every_seed_is_set_aside() -> None:
    for seed in range(10):
        made = canary_secrets.canaries(seed, list(canary_secrets.MAKERS))
        turns = canary_secrets._turns(made)[: 2 * len(made)]
        assert not any(canary_secrets.kept_by_parley(turn) for turn in turns)
