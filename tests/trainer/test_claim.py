"""The claim rules (trainer.claim): pure, the same for the webapp and the offline replay."""

from __future__ import annotations

from trainer.claim import (
    Candidate,
    ClaimRules,
    batch_choice,
    claim,
    fresh_choice,
    has_signal,
    holdout_choice,
    is_due,
    is_signed,
)


def _ready(n: int, *, signed: bool = True, signal: bool = True, start: int = 0) -> list[Candidate]:
    return [Candidate(key=start + i, signed=signed, signal=signal) for i in range(n)]


def test_a_hint_alone_is_a_signal_but_no_sign() -> None:
    assert has_signal(reward=0.0, hint="Use metric units.", correction="")
    assert not is_signed(reward=0.0, correction="")
    assert is_signed(reward=0.0, correction="Sure! Paris.")
    assert not has_signal(reward=0.0, hint="", correction="")


def test_no_update_is_due_without_a_signal_even_when_forced() -> None:
    rules = ClaimRules(batch_size=8, max_wait_s=600)
    assert not is_due(signal=0, oldest_wait_s=1e9, rules=rules, force=True)
    assert is_due(signal=1, oldest_wait_s=0, rules=rules, force=True)
    assert is_due(signal=8, oldest_wait_s=0, rules=rules)
    assert not is_due(signal=7, oldest_wait_s=599, rules=rules)
    assert is_due(signal=7, oldest_wait_s=600, rules=rules)


def test_the_batch_takes_samples_with_a_signal_first_then_the_oldest() -> None:
    ready = [*_ready(3, signed=False, signal=False), *_ready(2, start=3)]
    assert batch_choice(ready, size=3) == [3, 4, 0]
    assert batch_choice(ready, size=None, leaving={4}) == [3, 0, 1, 2]


def test_fresh_samples_are_the_newest_signed_when_four_times_as_many_wait() -> None:
    assert fresh_choice(_ready(8), count=2) == [7, 6]
    assert fresh_choice(_ready(7), count=2) == []  # a small batch trains whole
    assert fresh_choice(_ready(8), count=2, left_before={7}) == [6, 5]  # never fresh twice
    assert fresh_choice(_ready(8), count=0) == []


def test_a_batch_is_never_left_without_a_signal_by_its_fresh_samples() -> None:
    ready = [*_ready(6, signed=False, signal=False), *_ready(2, start=6)]
    rules = ClaimRules(batch_size=8, fresh=2)
    # two signed among eight: fewer than 4 x 2 with a signal, so none is left fresh anyway
    assert claim(ready, rules=rules).fresh == []
    hinted = [*_ready(6, signed=False, signal=True), *_ready(2, start=6)]
    chosen = claim(hinted, rules=ClaimRules(batch_size=6, fresh=2))
    assert chosen.fresh == [7, 6] and chosen.batch == [0, 1, 2, 3, 4, 5]
    unsigned_rest = [*_ready(6, signed=False, signal=False), *_ready(8, start=6)]
    chosen = claim(unsigned_rest, rules=ClaimRules(batch_size=2, fresh=2))
    assert chosen.fresh == [13, 12] and chosen.batch == [6, 7]


def test_the_replay_may_train_every_waiting_sample_but_the_fresh_ones() -> None:
    chosen = claim(_ready(12), rules=ClaimRules(batch_size=8, fresh=2), size=None)
    assert chosen.fresh == [11, 10] and chosen.batch == list(range(10))


def test_held_back_samples_are_the_most_recent_signed_outside_the_exclusions() -> None:
    on_record = [*_ready(4), Candidate(key=4, signed=False, signal=True), *_ready(2, start=5)]
    assert holdout_choice(on_record, exclude={6}, limit=3) == [5, 3, 2]
    assert holdout_choice(on_record, exclude=set(), limit=0) == []
