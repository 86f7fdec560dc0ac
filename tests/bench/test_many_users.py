"""The scale benchmark's figures, from updates as the database holds them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from bench.many_users_figures import (
    due_times,
    most_at_once,
    queue_delays,
    rounds_behind,
    same_lineage_overlaps,
)
from bench.many_users_run import _poisson

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _update(owner: int, start: float, end: float) -> dict:
    return {
        "owner_id": owner,
        "started_at": T0 + timedelta(seconds=start),
        "finished_at": T0 + timedelta(seconds=end),
    }


def test_updates_at_once_counts_overlapping_intervals_only() -> None:
    updates = [_update(1, 0, 2), _update(2, 1, 3), _update(3, 2, 4), _update(4, 5, 6)]
    assert most_at_once(updates) == 2  # one ending as another starts is not two at once
    assert most_at_once([]) == 0


def test_same_lineage_overlaps_are_counted_and_other_lineages_are_not() -> None:
    assert same_lineage_overlaps([_update(1, 0, 2), _update(2, 1, 3), _update(1, 2, 3)]) == 0
    assert same_lineage_overlaps([_update(1, 0, 2), _update(1, 1, 3)]) == 1


def test_poisson_draws_have_the_asked_mean() -> None:
    rng = random.Random(0)
    draws = [_poisson(rng, 2.5) for _ in range(4000)]
    assert abs(sum(draws) / len(draws) - 2.5) < 0.1
    assert _poisson(rng, 0.0) == 0


def _queued(pk: int, owner: int, queued: float, samples: list[int], end: float) -> dict:
    return {
        "pk": pk,
        "owner_id": owner,
        "created_at": T0 + timedelta(seconds=queued),
        "finished_at": T0 + timedelta(seconds=end),
        "summary": {"sample_ids": samples},
    }


def test_a_batch_is_due_when_full_or_waited_and_never_while_its_lineage_trains() -> None:
    made = {pk: T0 + timedelta(seconds=pk) for pk in range(1, 20)}
    full = _queued(1, owner=1, queued=9, samples=list(range(1, 9)), end=10)  # 8th at 8 s
    waited = _queued(2, owner=2, queued=14, samples=[2], end=15)  # 2 s + 12 s wait
    after = _queued(3, owner=1, queued=11, samples=[9], end=12)  # her first ran until 10 s
    due = due_times([full, waited, after], made, max_wait_s=12)
    assert [(due[pk] - T0).total_seconds() for pk in (1, 2, 3)] == [8.0, 14.0, 21.0]
    assert queue_delays([full, waited], due) == [1.0, 0.0]


def test_rounds_behind_counts_people_due_later_who_went_first() -> None:
    due = {1: T0, 2: T0 + timedelta(seconds=1), 3: T0 + timedelta(seconds=2)}
    fair = [_queued(1, 1, 3, [], 4), _queued(2, 2, 4, [], 5), _queued(3, 3, 5, [], 6)]
    assert rounds_behind(fair, due, workers=1) == 0
    unfair = [_queued(1, 1, 9, [], 10), _queued(2, 2, 4, [], 5), _queued(3, 3, 5, [], 6)]
    assert rounds_behind(unfair, due, workers=1) == 2  # both passed the first
    assert rounds_behind(unfair, due, workers=2) == 1
