"""A newcomer's first version while other people's updates are queued: the turn order against
the longest-wait order, side by side in one run.

    python -m bench.newcomer_wait [--regulars 3] [--newcomers 8] [--update-s 106]

Regular people keep a full batch ready at all times (each always has an update due: "3 other
people's updates queued"). Newcomers arrive one after another, one every six updates' time;
each gives the 8 pieces of feedback that start a first update, one every 20 s. Parley's real
scheduler (``workflows.claiming``), PostgreSQL, Redis broker and Celery train workers turn it
into updates; only the trainer is modelled (``bench.modelled_training``): an update takes
``--update-s`` seconds and a lineage's first one ``--first-update-s``, by default what a routine
update of 8 answers and a newcomer's first update took on 2 cores while the engine streamed to
4 clients (``python -m bench.train_under_load [--shape newcomer]``). Times are compressed like
``bench.many_users``'s and reported in modelled real seconds.

Two orders, one after the other in the same run: Parley's (``trainer.turn_order``: overdue
first, then newcomers, then the longest wait) and the longest wait alone
(``PARLEY_TRAIN_OVERDUE_S=0``: everyone counts as overdue, so only the wait orders them).
Reported for each: a newcomer's last feedback → their first version live (p50, max), and the
regulars' longest wait from a due batch to its update's start.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from typing import Any

from bench.common import percentile, record
from bench.many_users import django_compressed, in_scratch_infra
from bench.many_users_figures import BATCH
from bench.many_users_run import (
    COMPRESSION,
    Replicas,
    _feedback,
    _people,
    _reset_database,
    _start_workers,
    _stop,
)

FEEDBACK_GAP_S = 20.0
"""Modelled seconds between a newcomer's pieces of feedback."""
ARRIVE_EVERY_UPDATES = 6
"""A newcomer arrives every this many updates' time: the regulars use the rest of the train
worker's time (with every update due all the time, more newcomers than that would overload
it, and then the bound on waiting, not the order, decides)."""
ORDERS = (("turn order (Parley's)", 600), ("longest wait only", 0))


def _ready_counts(conversations: list[Any]) -> dict[int, int]:
    from django.db.models import Count

    from webapp.learning.models import Sample

    return dict(
        Sample.objects.filter(status=Sample.Status.READY, message__conversation__in=conversations)
        .values_list("message__conversation_id")
        .annotate(n=Count("pk"))
        .values_list("message__conversation_id", "n")
    )


def simulate(
    *,
    regulars: int,
    newcomers: int,
    workers: int,
    update_s: float,
    first_update_s: float | None,
    overdue_s: float,
    replicas: Replicas,
) -> dict[str, Any]:
    """One run in one order; the figures in modelled seconds."""
    from django.conf import settings
    from django.db.models import Max, Min

    from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
    from webapp.learning.workflows import claiming

    _reset_database()
    everyone = _people(regulars + newcomers)
    steady, new = everyone[:regulars], everyone[regulars:]
    overdue_bench = round(overdue_s / COMPRESSION)
    settings.TRAIN_WORKERS, settings.TRAIN_PEOPLE_PER_STEP = workers, 1
    settings.TRAIN_OVERDUE_S = overdue_bench
    settings.VLLM_BASE_URLS = replicas.urls
    env = dict(
        os.environ,
        VLLM_BASE_URLS=",".join(replicas.urls),
        PARLEY_TRAIN_WORKERS=str(workers),
        PARLEY_TRAIN_PEOPLE_PER_STEP="1",
        PARLEY_TRAIN_OVERDUE_S=str(overdue_bench),
        PARLEY_BENCH_UPDATE_S=str(update_s / COMPRESSION),
        PARLEY_BENCH_FIRST_UPDATE_S=str((first_update_s or update_s) / COMPRESSION),
        PARLEY_ADAPTERS_DIR=tempfile.mkdtemp(prefix="parley-newcomer-adapters-"),
    )
    running = _start_workers(workers, env)
    rng = random.Random(7)
    gap = FEEDBACK_GAP_S / COMPRESSION
    arrive_every = ARRIVE_EVERY_UPDATES * update_s / COMPRESSION
    given = [0] * newcomers
    started = time.monotonic()
    deadline = started + arrive_every * newcomers + 40 * update_s / COMPRESSION
    try:
        while time.monotonic() < deadline:
            now = time.monotonic() - started
            ready = _ready_counts(steady)
            _feedback([c for c in steady if ready.get(c.pk, 0) < BATCH], rng)
            for index, conversation in enumerate(new):
                due = index * arrive_every + given[index] * gap
                if given[index] < BATCH and now >= due:
                    _feedback([conversation], rng)
                    given[index] += 1
            claiming.training_updates_queue()
            firsts = PolicyVersion.objects.filter(
                owner_id__in=[c.owner_id for c in new], published_at__isnull=False
            ).values("owner_id")
            if firsts.distinct().count() == newcomers:
                break
            time.sleep(0.1)
    finally:
        _stop(running)
    last_feedback = dict(
        Sample.objects.filter(message__conversation__in=new)
        .values_list("message__conversation__owner_id")
        .annotate(last=Max("created_at"))
        .values_list("message__conversation__owner_id", "last")
    )
    first_live = dict(
        PolicyVersion.objects.filter(owner_id__in=list(last_feedback), published_at__isnull=False)
        .values_list("owner_id")
        .annotate(first=Min("published_at"))
        .values_list("owner_id", "first")
    )
    waits = [
        (first_live[owner] - last).total_seconds() * COMPRESSION
        for owner, last in last_feedback.items()
        if owner in first_live
    ]
    first_queued = dict(
        TrainingUpdate.objects.filter(owner_id__in=list(last_feedback))
        .values_list("owner_id")
        .annotate(first=Min("created_at"))
        .values_list("owner_id", "first")
    )
    queued = [
        (first_queued[owner] - last).total_seconds() * COMPRESSION
        for owner, last in last_feedback.items()
        if owner in first_queued
    ]

    return {
        "updates": TrainingUpdate.objects.count(),
        "updates_failed": TrainingUpdate.objects.filter(
            status=TrainingUpdate.Status.FAILED
        ).count(),
        "regulars": regulars,
        "newcomers": newcomers,
        "with_version": len(waits),
        "workers": workers,
        "update_s": update_s,
        "first_update_s": first_update_s or update_s,
        "overdue_s": overdue_s,
        "newcomer_queued_p50_s": percentile(queued, 0.5) if queued else float("nan"),
        "newcomer_live_p50_s": percentile(waits, 0.5) if waits else float("nan"),
        "newcomer_live_max_s": max(waits, default=float("nan")),
    }


def _inner(args: argparse.Namespace) -> int:
    django_compressed()
    rows = []
    with Replicas(count=1) as replicas:
        for label, overdue_s in ORDERS:
            print(f"bench | {label}", flush=True)
            figures = simulate(
                regulars=args.regulars,
                newcomers=args.newcomers,
                workers=args.workers,
                update_s=args.update_s,
                first_update_s=args.first_update_s,
                overdue_s=overdue_s,
                replicas=replicas,
            )
            rows.append({"order": label, **figures})
            record("newcomer_wait", rows[-1])
    print()
    print("| order | newcomers with a version | last feedback → first version p50 / max (min) |")
    print("| --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['order']} | {row['with_version']}/{row['newcomers']} "
            f"| {row['newcomer_live_p50_s'] / 60:.1f} / {row['newcomer_live_max_s'] / 60:.1f} |"
        )
    print(
        f"\n{args.regulars} regulars with an update always due, {args.workers} train worker(s), "
        f"an update of {args.update_s:.0f} s, a first one of "
        f"{args.first_update_s or args.update_s:.0f} s (modelled)."
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regulars", type=int, default=3)
    parser.add_argument("--newcomers", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--update-s", type=float, default=106.0, help="one update, modelled")
    parser.add_argument(
        "--first-update-s",
        type=float,
        default=62.0,
        help="a lineage's first update, modelled (train_under_load --shape newcomer, busy)",
    )
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return _inner(args) if args.inner else in_scratch_infra("bench.newcomer_wait")


if __name__ == "__main__":
    raise SystemExit(main())
