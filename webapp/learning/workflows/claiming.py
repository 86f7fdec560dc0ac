"""Claim and batch, the first stage of an update: when to train, and on which samples.

The rules themselves are ``trainer.claim`` (pure, shared with the offline replay); this module
reads the rows they apply to from PostgreSQL and writes what they chose.

- Trigger: ready samples with a signal (a reward, a hint or a correction) fill
  ``PARLEY_TRAIN_BATCH_SIZE``, or the oldest of them has waited ``PARLEY_TRAIN_MAX_WAIT_S``.
- Single flight per lineage: never two updates of one lineage at once. Updates of different
  lineages run side by side: ``PARLEY_TRAIN_WORKERS`` train workers (the whole deployment's),
  each training up to ``PARLEY_TRAIN_PEOPLE_PER_STEP`` people's updates in one stacked run, so
  that many may be queued or running at once.
- Pause: a user who paused learning ("My model") has their samples recorded but not trained;
  the trigger and the batch leave them out until they resume.
- Lineages: with ``PARLEY_LEARNING_SCOPE=user`` the trigger counts each user's samples apart and
  an update trains one user's samples into that user's lineage. Among lineages with a due
  batch and no update running, the order is ``trainer.turn_order``'s: anyone whose feedback
  has waited past ``PARLEY_TRAIN_OVERDUE_S``, then newcomers (their first version), then the
  longest wait, a wait counted from the feedback's arrival or from the lineage's last update,
  whichever is later (feedback that arrived before that update was the lineage's turn, and the
  batch size left it out). So nobody's flood of feedback delays another user's update by more
  than one update of theirs, and a newcomer's first version never queues behind routine ones.
  With ``shared``, one lineage trains on everyone's.
- The claim fixes the batch, the fresh samples left for the next update and the held-back ones
  the gate scores, in the update's summary. Samples are marked consumed only when the finished
  update is recorded (``workflows.publishing``), so a crashed update leaves them ready.
- A sample refused by the gate before is trained at ``PARLEY_TRAIN_REFUSAL_LR_FACTOR`` ^
  refusals times the learning rate (recorded in the update's config).
- An update whose task the broker refused stays QUEUED; the periodic sweep queues it again
  (``training_updates_unqueued``), so it never blocks later updates through single flight.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from trainer.algorithms import algorithm_get
from trainer.claim import (
    Candidate,
    ClaimRules,
    claim,
    has_signal,
    holdout_choice,
    is_due,
    is_signed,
)
from trainer.config import UpdateConfig
from trainer.refusals import backed_off_lr
from trainer.turn_order import LineageWait, next_lineage
from webapp.core.outbox import Task, enqueue
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.preferences import learning_paused
from webapp.learning.selectors import policy_version_live, unused_by_algorithm

ACTIVE = (TrainingUpdate.Status.QUEUED, TrainingUpdate.Status.RUNNING)
QUEUE_LOCK_KEY = 0x50415251  # "PARQ": queueing updates, one caller at a time
_CANDIDATE_FIELDS = ("pk", "reward", "hint", "correction", "group_key")


def claim_rules() -> ClaimRules:
    return ClaimRules(
        batch_size=settings.TRAIN_BATCH_SIZE,
        max_wait_s=settings.TRAIN_MAX_WAIT_S,
        fresh=settings.GATE_FRESH_SAMPLES,
        holdout=settings.GATE_HOLDOUT_SAMPLES,
    )


def update_config() -> dict[str, Any]:
    overrides: dict[str, Any] = {
        "algorithm": settings.TRAIN_ALGORITHM,
        "batch_baseline": settings.TRAIN_BATCH_BASELINE,
    }
    if settings.TRAIN_LR:
        overrides["lr"] = settings.TRAIN_LR
    if settings.TRAIN_STEPS:
        overrides["steps_per_batch"] = settings.TRAIN_STEPS
    if settings.TRAIN_REFINE_MAX_TOKENS >= 0:
        overrides["refine_max_tokens"] = settings.TRAIN_REFINE_MAX_TOKENS
    return dataclasses.asdict(UpdateConfig(**overrides))


def lineage_samples(samples: QuerySet[Sample], *, owner_id: int | None) -> QuerySet[Sample]:
    """The samples a lineage learns from: its owner's (answers in their conversations), or
    everyone's for the shared lineage."""
    if owner_id is None:
        return samples
    return samples.filter(message__conversation__owner_id=owner_id)


def claimable_samples(*, algorithm: str, owner_id: int | None = None) -> QuerySet[Sample]:
    """Ready samples of the kinds the algorithm trains on (trainer.algorithms), of a lineage,
    leaving out those of users who paused learning (they stay ready for when they resume).

    An algorithm that uses no reward (``opd``) claims only samples with a hint or a correction:
    a 👍 or 👎 alone gives it nothing to train, and a batch of only those could not train at
    all. They stay ready (and count as held-back feedback) for an algorithm that uses them.
    Likewise an algorithm that uses no hint (``rl``) leaves a hint-only OPD sample (it has no
    reward to train) unless a correction comes with it."""
    chosen = algorithm_get(algorithm)
    claimable = Sample.objects.filter(
        status=Sample.Status.READY, kind__in=chosen.sample_kinds
    ).exclude(message__conversation__owner__learning_preference__paused=True)
    unused = unused_by_algorithm(algorithm)
    if unused:
        claimable = claimable.exclude(unused)
    return lineage_samples(claimable, owner_id=owner_id)


def _candidates(rows: Iterable[tuple[Any, ...]]) -> list[Candidate]:
    """(pk, reward, hint, correction, group key) rows, oldest first, as the claim rules see
    them."""
    return [
        Candidate(
            key=pk,
            signed=is_signed(reward=reward, correction=correction),
            signal=has_signal(reward=reward, hint=hint, correction=correction),
            group=group_key or None,
        )
        for pk, reward, hint, correction, group_key in rows
    ]


def _oldest_first(samples: QuerySet[Sample]) -> QuerySet[Sample]:
    return samples.order_by("created_at", "pk")


def candidates(samples: QuerySet[Sample]) -> list[Candidate]:
    """The samples, oldest first, as the claim rules see them."""
    return _candidates(_oldest_first(samples).values_list(*_CANDIDATE_FIELDS))


def _due_lineages(*, force: bool) -> dict[int | None, Any]:
    """Each lineage owner with a due batch (None: the shared lineage) → when its oldest
    sample with a signal was made."""
    by_user = settings.LEARNING_SCOPE == "user"
    stats: dict[int | None, list[Any]] = {}  # owner → [signal count, oldest]
    rows = _oldest_first(claimable_samples(algorithm=settings.TRAIN_ALGORITHM)).values_list(
        "message__conversation__owner_id", "created_at", "reward", "hint", "correction"
    )
    for owner, created, reward, hint, correction in rows:
        if not has_signal(reward=reward, hint=hint, correction=correction):
            continue
        entry = stats.setdefault(owner if by_user else None, [0, created])
        entry[0] += 1
    now, rules = timezone.now(), claim_rules()
    return {
        owner: oldest
        for owner, (signal, oldest) in stats.items()
        if is_due(
            signal=signal,
            oldest_wait_s=(now - oldest).total_seconds(),
            rules=rules,
            force=force,
        )
    }


def lineage_waits(*, force: bool = False) -> dict[int | None, Any]:
    """Each lineage with a due batch and no update running (None: the shared lineage) → since
    when its feedback has waited: its oldest sample with a signal, or its last update's start
    where that is later."""
    due = _due_lineages(force=force)
    running = set(
        TrainingUpdate.objects.filter(status__in=ACTIVE).values_list("owner_id", flat=True)
    )
    waiting = {owner: oldest for owner, oldest in due.items() if owner not in running}
    last = dict(
        TrainingUpdate.objects.filter(owner_id__in=[o for o in waiting if o is not None])
        .values("owner_id")
        .annotate(last=Max("created_at"))
        .values_list("owner_id", "last")
    )
    if None in waiting:
        shared_last = TrainingUpdate.objects.filter(owner_id=None).aggregate(last=Max("created_at"))
        last[None] = shared_last["last"]
    return {
        owner: max(oldest, last[owner]) if last.get(owner) else oldest
        for owner, oldest in waiting.items()
    }


def next_lineage_owner(*, force: bool = False) -> int | None:
    """The user whose update goes next (``PARLEY_LEARNING_SCOPE=user``), or None if no
    lineage without a running update has a due batch, in ``trainer.turn_order``'s order:
    anyone waiting past ``PARLEY_TRAIN_OVERDUE_S``, then newcomers (no version of their own
    published yet), then the longest wait (``lineage_waits``)."""
    waits = lineage_waits(force=force)
    if not waits:
        return None
    published = set(
        PolicyVersion.objects.filter(owner_id__in=list(waits), published_at__isnull=False)
        .values_list("owner_id", flat=True)
        .distinct()
    )
    now = timezone.now()
    return next_lineage(
        {
            owner: LineageWait(
                waited_s=(now - since).total_seconds(), has_version=owner in published
            )
            for owner, since in waits.items()
        },
        overdue_s=settings.TRAIN_OVERDUE_S,
    )


def train_slots() -> int:
    """Updates that may be queued or running at once: each train worker's stacked run takes
    up to ``PARLEY_TRAIN_PEOPLE_PER_STEP`` people's (one lineage's update alone with
    ``shared``)."""
    return settings.TRAIN_WORKERS * settings.TRAIN_PEOPLE_PER_STEP


@transaction.atomic
def training_update_maybe_queue(*, force: bool = False) -> TrainingUpdate | None:
    """Queue the next lineage's update when its batch is due and a train slot is free.

    Single flight per lineage, at most ``PARLEY_TRAIN_WORKERS`` updates at once; per user, in
    order of waiting (``lineage_waits``), with ``PARLEY_LEARNING_SCOPE=user``; over everyone's
    with ``shared``. ``training_updates_queue`` fills every free slot.
    """
    # Lock the active updates, and every caller behind one lock, so that two callers can
    # neither queue two updates of one lineage nor pass the slot limit.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [QUEUE_LOCK_KEY])
    if TrainingUpdate.objects.filter(status__in=ACTIVE).count() >= train_slots():
        return None
    owner_id = None
    if settings.LEARNING_SCOPE == "user":
        owner_id = next_lineage_owner(force=force)
        if owner_id is None:
            return None
    elif not lineage_waits(force=force):
        return None
    config = update_config()
    update = TrainingUpdate.objects.create(
        algorithm=config["algorithm"],
        owner_id=owner_id,
        config=config,
        base_version=policy_version_live(owner_id=owner_id),
    )
    enqueue(Task.TRAIN_UPDATE, update.pk)
    return update


def training_updates_queue(*, force: bool = False) -> list[TrainingUpdate]:
    """Queue updates while train slots are free and lineages have a due batch."""
    queued: list[TrainingUpdate] = []
    while len(queued) < train_slots():
        update = training_update_maybe_queue(force=force)
        if update is None:
            break
        queued.append(update)
    return queued


@transaction.atomic
def training_update_claim(*, update_id: int) -> TrainingUpdate | None:
    """Mark the update running and fix its batch; None when it already finished."""
    update = TrainingUpdate.objects.select_for_update().get(pk=update_id)
    if update.status not in ACTIVE:
        return None
    claimable = claimable_samples(algorithm=update.algorithm, owner_id=update.owner_id)
    chosen = claim(candidates(claimable), rules=claim_rules(), left_before=_fresh_before(update))
    ids: list[int] = chosen.batch
    if not ids:
        # Queued before its owner paused, or its samples were re-judged or deleted meanwhile.
        paused = update.owner_id is not None and learning_paused(user_id=update.owner_id)
        update.status = TrainingUpdate.Status.FAILED
        update.error = (
            "Its owner paused learning before it started; nothing was trained."
            if paused
            else "No ready sample this algorithm trains on was left when it started; "
            "nothing was trained."
        )
        update.finished_at = timezone.now()
        update.save(update_fields=["status", "error", "finished_at"])
        return None
    refusals = max(Sample.objects.filter(pk__in=ids).values_list("refusals", flat=True), default=0)
    update.status = TrainingUpdate.Status.RUNNING
    update.started_at = timezone.now()
    update.config = refusal_backoff(update.config, refusals=refusals)
    update.summary = {
        **update.summary,
        "sample_ids": ids,
        "fresh_ids": list(chosen.fresh),
        "holdout_ids": holdout_ids(exclude=[*ids, *chosen.fresh], owner_id=update.owner_id),
    }
    update.metrics = []
    update.save(update_fields=["status", "started_at", "config", "summary", "metrics"])
    return update


def refusal_backoff(config: dict[str, Any], *, refusals: int) -> dict[str, Any]:
    """The update's config with its learning rate scaled down for samples refused before.

    ``lr_before_refusals`` keeps the configured rate, so a claim run twice never compounds.

    A config that leaves the rate out trains at ``UpdateConfig``'s default, so that is the base.

    >>> refusal_backoff({"lr": 1e-3}, refusals=0)["lr"]
    0.001
    """
    base_lr = float(config.get("lr_before_refusals", config.get("lr", UpdateConfig.lr)))
    return {
        **config,
        "lr": backed_off_lr(base_lr, refusals=[refusals], factor=settings.TRAIN_REFUSAL_LR_FACTOR),
        "lr_before_refusals": base_lr,
        "refusals": refusals,
    }


def _fresh_before(update: TrainingUpdate) -> list[int]:
    """The samples the lineage's previous update left fresh."""
    previous = (
        TrainingUpdate.objects.filter(owner_id=update.owner_id, pk__lt=update.pk)
        .order_by("-pk")
        .values_list("summary", flat=True)
        .first()
    )
    return list((previous or {}).get("fresh_ids", []))


def holdout_ids(*, exclude: list[int], owner_id: int | None = None) -> list[int]:
    """The lineage's most recent judged samples with a sign that the gate scores the candidate
    on (``trainer.claim.holdout_choice``): ready ones the update leaves for later, and ones
    trained into earlier versions, but not the batch that trained the live version itself: the
    live version has just fitted those, so any candidate scored worse on them whether it had
    learnt or not."""
    limit = settings.GATE_HOLDOUT_SAMPLES
    live = policy_version_live(owner_id=owner_id)
    recorded = lineage_samples(
        Sample.objects.filter(status__in=[Sample.Status.READY, Sample.Status.CONSUMED]),
        owner_id=owner_id,
    )
    fitted = set(recorded.filter(update__produced_version=live).values_list("pk", flat=True))
    excluded = {*exclude, *fitted}
    newest = recorded.order_by("-created_at", "-pk").values_list(*_CANDIDATE_FIELDS)
    rows: list[tuple[Any, ...]] = []
    chosen: list[int] = []
    # Newest first, a page at a time, until the rule has chosen ``limit`` or none are left.
    page = max(limit * 4, 32)
    while limit > 0:
        more = list(newest[len(rows) : len(rows) + page])
        rows.extend(more)
        chosen = holdout_choice(_candidates(rows[::-1]), exclude=excluded, limit=limit)
        if len(chosen) >= limit or len(more) < page:
            break
    return chosen


def training_updates_unqueued(*, older_than: timedelta) -> list[int]:
    """Updates still QUEUED ``older_than`` after creation: their task was lost (broker down)
    or is still waiting for a train worker. Queueing them again is safe: a second task for
    the same update waits for the lock, then finds it finished and does nothing."""
    return list(
        TrainingUpdate.objects.filter(
            status=TrainingUpdate.Status.QUEUED, created_at__lt=timezone.now() - older_than
        )
        .order_by("created_at")
        .values_list("pk", flat=True)
    )
