"""The scale benchmark's figures, from updates as the database holds them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from bench.many_users_run import _most_at_once, _poisson, _same_lineage_overlaps

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _update(owner: int, start: float, end: float) -> dict:
    return {
        "owner_id": owner,
        "started_at": T0 + timedelta(seconds=start),
        "finished_at": T0 + timedelta(seconds=end),
    }


def test_updates_at_once_counts_overlapping_intervals_only() -> None:
    updates = [_update(1, 0, 2), _update(2, 1, 3), _update(3, 2, 4), _update(4, 5, 6)]
    assert _most_at_once(updates) == 2  # one ending as another starts is not two at once
    assert _most_at_once([]) == 0


def test_same_lineage_overlaps_are_counted_and_other_lineages_are_not() -> None:
    assert _same_lineage_overlaps([_update(1, 0, 2), _update(2, 1, 3), _update(1, 2, 3)]) == 0
    assert _same_lineage_overlaps([_update(1, 0, 2), _update(1, 1, 3)]) == 1


def test_poisson_draws_have_the_asked_mean() -> None:
    rng = random.Random(0)
    draws = [_poisson(rng, 2.5) for _ in range(4000)]
    assert abs(sum(draws) / len(draws) - 2.5) < 0.1
    assert _poisson(rng, 0.0) == 0
