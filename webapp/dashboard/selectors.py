"""The numbers behind the staff dashboard, as plain JSON-ready dicts.

``dashboard_data()`` is exactly what ``/dashboard/data.json`` returns and what the page's
charts draw, so the tests compare it with the database directly. Each series is bounded (the
latest N points) so a page poll costs the same however long Parley has been running.

``owner`` (the dashboard's ``?user=NAME``) narrows it to one user's lineage: their versions and
updates, the judgements, feedback and samples of their conversations, and their live version
(the shared one while they have none). Without it: everything, and the shared live version.
"""

from __future__ import annotations

from datetime import timedelta
from statistics import fmean
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from webapp.chat.models import Feedback
from webapp.dashboard.queues import queue_depths
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live

REWARD_WINDOW = 20  # judgements in the moving average
REWARD_POINTS = 500  # latest judgements drawn
FEEDBACK_DAYS = 30
UPDATES_SHOWN = 50
VERSIONS_SHOWN = 50
QUEUES = ("judge", "train")
UPDATE_METRICS = ("loss", "kl", "clip_fraction")


def moving_average(values: list[float], window: int) -> list[float]:
    """Trailing mean over the last ``window`` values (fewer at the start).

    >>> moving_average([1, -1, 1, 1], 2)
    [1.0, 0.0, 0.0, 1.0]
    """
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _of(rows: QuerySet[Any], owner: Any, path: str) -> QuerySet[Any]:
    return rows if owner is None else rows.filter(**{path: owner})


def dashboard_users() -> list[Any]:
    """The users the dashboard's filter offers: those with a version or an update of their own,
    or samples waiting to train."""
    return list(
        get_user_model()
        .objects.filter(
            Q(policy_versions__isnull=False)
            | Q(training_updates__isnull=False)
            | Q(conversations__messages__samples__status=Sample.Status.READY)
        )
        .distinct()
        .order_by("username")
    )


def reward_series(
    *, window: int = REWARD_WINDOW, limit: int = REWARD_POINTS, owner: Any = None
) -> dict[str, Any]:
    """Every judgement's score (the reward the loop assigned), oldest first, with its moving
    average; the latest ``limit`` judgements."""
    rows = list(
        _of(Judgement.objects.all(), owner, "message__conversation__owner")
        .order_by("-created_at", "-pk")
        .values_list("pk", "created_at", "score")[:limit]
    )
    rows.reverse()
    averages = moving_average([float(score) for _, _, score in rows], window)
    return {
        "window": window,
        "points": [
            {"judgement_id": pk, "at": at.isoformat(), "score": score, "moving_average": avg}
            for (pk, at, score), avg in zip(rows, averages, strict=True)
        ],
    }


def feedback_per_day(*, days: int = FEEDBACK_DAYS, owner: Any = None) -> list[dict[str, Any]]:
    """👍, 👎 and comments (a comment or a correction) per day of the feedback's creation, in
    the server's time zone, over the last ``days`` days; days without feedback are left out."""
    since = timezone.now() - timedelta(days=days)
    rows = (
        _of(Feedback.objects.filter(created_at__gte=since), owner, "message__conversation__owner")
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(
            up=Count("pk", filter=Q(rating=1)),
            down=Count("pk", filter=Q(rating=-1)),
            comments=Count("pk", filter=~Q(comment="") | ~Q(correction="")),
        )
        .order_by("day")
    )
    return [
        {
            "day": row["day"].isoformat(),
            "up": row["up"],
            "down": row["down"],
            "comments": row["comments"],
        }
        for row in rows
    ]


def _mean_of(steps: list[dict[str, Any]], key: str) -> float | None:
    values = [float(s[key]) for s in steps if isinstance(s.get(key), int | float)]
    return fmean(values) if values else None


def update_metrics(*, limit: int = UPDATES_SHOWN, owner: Any = None) -> list[dict[str, Any]]:
    """Loss, KL and clip fraction per training update: the mean over the update's steps (the
    entries of ``metrics`` that carry a ``step``); None where a step never reported it (KL is
    None when the KL penalty is off)."""
    updates = list(
        _of(TrainingUpdate.objects.exclude(metrics=[]), owner, "owner")
        .select_related("produced_version")
        .order_by("-created_at", "-pk")[:limit]
    )
    updates.reverse()
    out = []
    for update in updates:
        steps = [m for m in update.metrics if isinstance(m, dict) and "step" in m]
        version = update.produced_version
        out.append(
            {
                "update_id": update.pk,
                "status": update.status,
                "algorithm": update.algorithm,
                "steps": len(steps),
                "produced_version": version.number if version else None,
                **{key: _mean_of(steps, key) for key in UPDATE_METRICS},
            }
        )
    return out


def version_probes(*, limit: int = VERSIONS_SHOWN, owner: Any = None) -> list[dict[str, Any]]:
    """Each version's probe metrics, oldest first: the step it took (KL to the version it was
    trained from, ``probe_kl``, the figure the gate limits), its distance from the base
    (``probe_kl_base``, reported, never gated; None for versions recorded before it was) and
    its perplexity."""
    versions = list(
        _of(PolicyVersion.objects.select_related("owner"), owner, "owner").order_by("-number")[
            :limit
        ]
    )
    versions.reverse()
    return [
        {
            "number": v.number,
            "label": v.label,
            "status": v.status,
            "owner": v.owner.get_username() if v.owner_id else None,
            "probe_kl": v.probe_metrics.get("probe_kl"),
            "probe_kl_base": v.probe_metrics.get("probe_kl_base"),
            "probe_ppl": v.probe_metrics.get("probe_ppl"),
        }
        for v in versions
    ]


def dashboard_data(*, owner: Any = None) -> dict[str, Any]:
    live = policy_version_live(owner_id=owner.pk if owner is not None else None)
    return {
        "generated_at": timezone.now().isoformat(),
        "user": owner.get_username() if owner is not None else None,
        "live_version": {
            "number": live.number,
            "label": live.label,
            "owner": live.owner.get_username() if live.owner_id else None,
            "published_at": live.published_at.isoformat() if live.published_at else None,
            "probe_kl": live.probe_metrics.get("probe_kl"),
            "probe_kl_base": live.probe_metrics.get("probe_kl_base"),
            "probe_ppl": live.probe_metrics.get("probe_ppl"),
        },
        "samples_ready": _of(
            Sample.objects.filter(status=Sample.Status.READY), owner, "message__conversation__owner"
        ).count(),
        "queues": queue_depths(broker_url=settings.CELERY_BROKER_URL, names=QUEUES),
        "reward": reward_series(owner=owner),
        "feedback_per_day": feedback_per_day(owner=owner),
        "updates": update_metrics(owner=owner),
        "versions": version_probes(owner=owner),
    }
