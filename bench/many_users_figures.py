"""The scale benchmark's figures from the updates and samples a run left (``bench.many_users``):
pure functions of the rows, so they are tested apart from a run."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

BATCH = 8
"""The batch size the benchmark sets (``PARLEY_TRAIN_BATCH_SIZE``)."""


def most_at_once(updates: list[dict[str, Any]]) -> int:
    events = sorted(
        [(u["started_at"], 1) for u in updates] + [(u["finished_at"], -1) for u in updates],
        key=lambda event: (event[0], event[1]),
    )
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def same_lineage_overlaps(updates: list[dict[str, Any]]) -> int:
    by_owner: dict[Any, list[dict[str, Any]]] = {}
    for update in updates:
        by_owner.setdefault(update["owner_id"], []).append(update)
    overlaps = 0
    for mine in by_owner.values():
        mine.sort(key=lambda u: u["started_at"])
        pairs = itertools.pairwise(mine)
        overlaps += sum(1 for a, b in pairs if b["started_at"] < a["finished_at"])
    return overlaps


def due_times(
    updates: list[dict[str, Any]], made: dict[int, datetime], max_wait_s: float
) -> dict[int, datetime]:
    """When each update's batch became due (``made``: each sample's arrival): its 8th sample's
    arrival or its oldest sample's wait running out, and never before the lineage's previous
    update finished."""
    previous: dict[Any, datetime] = {}
    due: dict[int, datetime] = {}
    for update in sorted(updates, key=lambda u: u["created_at"]):
        times = sorted(made[pk] for pk in update["summary"].get("sample_ids", []) if pk in made)
        if not times:
            continue
        moment = times[0] + timedelta(seconds=max_wait_s)
        if len(times) >= BATCH:
            moment = min(moment, times[BATCH - 1])
        due[update["pk"]] = max(moment, previous.get(update["owner_id"], moment))
        previous[update["owner_id"]] = update["finished_at"]
    return due


def rounds_behind(updates: list[dict[str, Any]], due: dict[int, datetime], workers: int) -> float:
    """The most scheduling rounds (``workers`` updates each) a lineage was passed over: updates
    of other people whose batch became due after its own, queued before it."""
    timed = [(due[u["pk"]], u["created_at"], u["owner_id"]) for u in updates if u["pk"] in due]
    worst = 0
    for mine_due, mine_queued, owner in timed:
        passed = sum(
            1
            for other_due, other_queued, other in timed
            if other != owner and other_due > mine_due and other_queued < mine_queued
        )
        worst = max(worst, passed)
    return worst / workers


def queue_delays(updates: list[dict[str, Any]], due: dict[int, datetime]) -> list[float]:
    """Seconds from each update's batch being due to the update being queued."""
    return [
        max(0.0, (u["created_at"] - due[u["pk"]]).total_seconds())
        for u in updates
        if u["pk"] in due
    ]
