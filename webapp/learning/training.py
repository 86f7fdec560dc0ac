"""Training updates and policy versions: when to train, which samples, and publishing.

- Trigger: ready samples that can move the model (``SIGNAL``: a reward, a hint or a
  correction) reach ``PARLEY_TRAIN_BATCH_SIZE``, or the oldest of them has waited
  ``PARLEY_TRAIN_MAX_WAIT_S``; one update is queued at a time (single flight). Reward-0
  samples of conversations that closed without feedback never make a batch full: they fill
  the places the signal leaves, signal first.
- Pause: a user who paused learning ("My model") has their samples recorded but not trained;
  the trigger and the batch leave them out until they resume.
- Lineages: with ``PARLEY_LEARNING_SCOPE=user`` the trigger counts each user's samples apart,
  an update trains one user's samples into that user's lineage (starting from their live
  version, or the shared one for their first), and users with a ready batch take turns: the
  one whose last update is oldest goes first, so nobody's flood of feedback delays another
  user's update by more than one update. With ``shared``, one lineage trains on everyone's.
- The update itself runs under a PostgreSQL advisory lock held by the train worker's
  connection: never two updates at once, and a worker that dies releases it with its connection.
- Samples are consumed exactly once: the batch is chosen when the update starts, but samples are
  marked consumed only in the transaction that records the finished update. A crashed update
  leaves them ready; a redelivered task for a finished update trains nothing again, and only
  publishes the version if the worker died before it was published.
- No feedback is lost: an update the gate refuses gives its samples back (ready again, one more
  refusal each); the next update that trains them runs at ``PARLEY_TRAIN_REFUSAL_LR_FACTOR`` ^
  refusals times the learning rate (recorded in its config). A sample refused
  ``PARLEY_TRAIN_MAX_REFUSALS`` times is excluded, with the gate's reasons as its reason.
- Each update leaves its ``PARLEY_GATE_FRESH_SAMPLES`` newest judged samples with a sign for
  the next one (at most a quarter of what is ready): no version has trained on them, so they
  show whether the candidate got better or worse at what the user says now. The gate also
  scores ``PARLEY_GATE_HOLDOUT_SAMPLES`` recent samples earlier versions trained on, which
  decide only when there are no fresh ones (``trainer.gate``).
- An update whose task the broker refused stays QUEUED; the periodic sweep queues it again
  (``training_updates_unqueued``), so it never blocks later updates through single flight.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Max, Min, Q, QuerySet
from django.utils import timezone

from trainer.algorithms import algorithm_get
from trainer.config import UpdateConfig
from trainer.refusals import backed_off_lr
from webapp.core.outbox import Task, enqueue
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.notify import push_learning_status
from webapp.learning.preferences import learning_paused
from webapp.learning.selectors import policy_version_live, unused_by_algorithm

TRAINING_LOCK_KEY = 0x5041524C  # "PARL": the advisory lock id for single-flight training


@contextlib.contextmanager
def training_lock() -> Iterator[bool]:
    """A session-level PostgreSQL advisory lock; yields whether this worker holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [TRAINING_LOCK_KEY])
        acquired = bool(cursor.fetchone()[0])
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [TRAINING_LOCK_KEY])


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


SIGNED = ~Q(reward=0) | ~Q(correction="")
"""A sample with a sign, a reward or a correction: what the gate scores a candidate on."""

SIGNAL = SIGNED | ~Q(hint="")
"""A sample that can move the model: a reward, a hint or a correction. A conversation that
closes without feedback still leaves a reward-0 sample (so every session counts in a GRPO
group), but a batch of only those would train nothing: no update (and no version) for it.
They neither count towards a full batch nor take a place a sample with a signal could have
(``batch_order``)."""


def batch_order(samples: QuerySet[Sample]) -> QuerySet[Sample]:
    """Samples with a signal first, then the oldest first: a user who chatted a while without
    feedback and then corrected an answer gets the correction trained in the next update, not
    a batch of their earlier unrated answers (a version that trained nothing, seen from a fresh
    ``make run``: 12 unrated answers then 8 corrections made v1 of 8 unrated answers)."""
    return samples.annotate(
        has_signal=ExpressionWrapper(SIGNAL, output_field=BooleanField())
    ).order_by("-has_signal", "created_at", "pk")


def _due_stats() -> dict[str, Any]:
    """What the trigger reads of a lineage's claimable samples: how many have a signal, and
    when the oldest of them was made."""
    return {"signal": Count("id", filter=SIGNAL), "oldest": Min("created_at", filter=SIGNAL)}


def _is_due(stats: dict[str, Any], *, force: bool) -> bool:
    """A batch is due when samples with a signal fill it, or the oldest has waited long
    enough (or ``force``); never without one: it would train nothing."""
    if not stats["signal"]:
        return False
    waited = (timezone.now() - stats["oldest"]).total_seconds()
    return (
        force or stats["signal"] >= settings.TRAIN_BATCH_SIZE or waited >= settings.TRAIN_MAX_WAIT_S
    )


def next_lineage_owner(*, force: bool = False) -> int | None:
    """The user whose update goes next (``PARLEY_LEARNING_SCOPE=user``), or None if nobody's
    batch is due. Among users with a due batch, the one whose last update is oldest (never
    updated: first of all), then the one whose oldest sample with a signal is oldest."""
    due = {
        row["owner"]: row["oldest"]
        for row in claimable_samples(algorithm=settings.TRAIN_ALGORITHM)
        .values(owner=F("message__conversation__owner_id"))
        .annotate(**_due_stats())
        if _is_due(row, force=force)
    }
    if not due:
        return None
    last = dict(
        TrainingUpdate.objects.filter(owner_id__in=list(due))
        .values("owner_id")
        .annotate(last=Max("created_at"))
        .values_list("owner_id", "last")
    )
    return min(due, key=lambda owner: (owner in last, last.get(owner), due[owner], owner))


def _shared_is_due(*, force: bool) -> bool:
    stats = claimable_samples(algorithm=settings.TRAIN_ALGORITHM).aggregate(**_due_stats())
    return _is_due(stats, force=force)


@transaction.atomic
def training_update_maybe_queue(*, force: bool = False) -> TrainingUpdate | None:
    """Queue an update when enough samples are ready (or waited long enough); one at a time.

    Per user, in turn, with ``PARLEY_LEARNING_SCOPE=user``; over everyone's with ``shared``.
    """
    owner_id = None
    if settings.LEARNING_SCOPE == "user":
        owner_id = next_lineage_owner(force=force)
        if owner_id is None:
            return None
    elif not _shared_is_due(force=force):
        return None
    # Single flight: lock the table's queue head so two callers cannot both queue one.
    list(
        TrainingUpdate.objects.select_for_update().filter(
            status__in=[TrainingUpdate.Status.QUEUED, TrainingUpdate.Status.RUNNING]
        )
    )
    if TrainingUpdate.objects.filter(
        status__in=[TrainingUpdate.Status.QUEUED, TrainingUpdate.Status.RUNNING]
    ).exists():
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


@transaction.atomic
def training_update_claim(*, update_id: int) -> TrainingUpdate | None:
    """Mark the update running and fix its batch; None when it already finished."""
    update = TrainingUpdate.objects.select_for_update().get(pk=update_id)
    if update.status not in (TrainingUpdate.Status.QUEUED, TrainingUpdate.Status.RUNNING):
        return None
    claimable = claimable_samples(algorithm=update.algorithm, owner_id=update.owner_id)
    fresh = fresh_ids(claimable, left_before=_fresh_before(update))

    def batch(leaving: list[int]) -> list[int]:
        return list(
            batch_order(claimable.exclude(pk__in=leaving)).values_list("pk", flat=True)[
                : settings.TRAIN_BATCH_SIZE
            ]
        )

    ids = batch(fresh)
    if fresh and not Sample.objects.filter(SIGNAL, pk__in=ids).exists():
        fresh, ids = [], batch([])  # a batch left without a signal would train nothing
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
        "fresh_ids": fresh,
        "holdout_ids": holdout_ids(exclude=[*ids, *fresh], owner_id=update.owner_id),
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


def fresh_ids(claimable: QuerySet[Sample], *, left_before: list[int] = ()) -> list[int]:
    """The newest ready samples with a sign, which this update leaves for the next one so the
    gate can score the candidate on feedback no version has trained on:
    ``PARLEY_GATE_FRESH_SAMPLES`` of them when at least four times as many with a signal are
    ready, else none (a small batch, or one the wait trigger started, trains whole; the check
    is never left to one sample's word). Never one the lineage's previous update left fresh already
    (``left_before``): the next update trains it, so no sample waits longer than one update."""
    count = settings.GATE_FRESH_SAMPLES
    if count <= 0 or claimable.filter(SIGNAL).count() < 4 * count:
        return []
    return list(
        claimable.filter(SIGNED)
        .exclude(pk__in=list(left_before))
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[:count]
    )


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
    """The most recent judged samples with a sign (a reward or a correction) not in the batch
    nor left fresh (``exclude``):
    ready ones the update leaves for later, and ones already trained into earlier versions.
    Of the lineage's own feedback: a user's candidate is checked on what that user said.

    Not the batch that trained the live version itself: the live version has just fitted those
    samples, so any candidate scored worse on them (on 5 of 8 refusals in the replay, all in the
    versions where the preference was being learnt) whether it had learnt or not."""
    live = policy_version_live(owner_id=owner_id)
    return list(
        lineage_samples(
            Sample.objects.filter(status__in=[Sample.Status.READY, Sample.Status.CONSUMED]),
            owner_id=owner_id,
        )
        .exclude(pk__in=exclude)
        .exclude(update__produced_version=live)
        .filter(SIGNED)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[: settings.GATE_HOLDOUT_SAMPLES]
    )


def training_update_unpublished(*, update_id: int) -> PolicyVersion | None:
    """The version a finished update produced, if it passed the gate but was never published.

    A train worker that dies between recording the update and publishing its version leaves
    the version a candidate; the redelivered task publishes it, unless a newer one is live.
    """
    update = TrainingUpdate.objects.select_related("produced_version").get(pk=update_id)
    version = update.produced_version
    if (
        update.status != TrainingUpdate.Status.DONE
        or version is None
        or version.status != PolicyVersion.Status.CANDIDATE
    ):
        return None
    live = policy_version_live(owner_id=version.owner_id)
    return version if live.number < version.number else None


@dataclasses.dataclass(frozen=True)
class SampleRow:
    """One Sample as stored: the tokens serving sampled, and the hint and correction as text
    (the trainer tokenises those with the base model's tokenizer)."""

    prompt_messages: list[dict[str, Any]]
    prompt_token_ids: list[int]
    response_token_ids: list[int]
    response_logprobs: list[float]
    reward: float | None
    hint: str | None
    correction: str
    group_id: str | None
    tools: list[dict[str, Any]] | None = None
    """The tools the request offered (they are part of the prompt the template rendered)."""
    temperature: float = 1.0
    """The temperature the answer was sampled at (its log-probs are at this temperature)."""


def batch_for_update(*, update: TrainingUpdate) -> list[SampleRow]:
    """The update's claimed samples that have tokens, in id order."""
    return _rows(update.summary.get("sample_ids", []))


def holdout_for_update(*, update: TrainingUpdate) -> list[SampleRow]:
    """The judged samples earlier versions trained on that the update checks the candidate on,
    in id order."""
    return _rows(update.summary.get("holdout_ids", []))


def fresh_for_update(*, update: TrainingUpdate) -> list[SampleRow]:
    """The newest judged samples the update left for the next one, to check the candidate on
    (none for an update claimed before they were kept apart), in id order."""
    return _rows(update.summary.get("fresh_ids", []))


def _rows(ids: list[int]) -> list[SampleRow]:
    samples = Sample.objects.filter(pk__in=ids).select_related("message").order_by("pk")
    return [
        SampleRow(
            prompt_messages=sample.prompt_messages,
            prompt_token_ids=list(sample.prompt_token_ids),
            response_token_ids=list(sample.response_token_ids),
            response_logprobs=[float(x) for x in sample.response_logprobs],
            reward=sample.reward if sample.kind != Sample.Kind.OPD else None,
            hint=sample.hint or None,
            correction=sample.correction,
            group_id=sample.group_key or None,
            tools=sample.message.sampling_params.get("tools") or None,
            temperature=_temperature(sample.message.sampling_params),
        )
        for sample in samples
        if sample.prompt_token_ids and sample.response_token_ids
    ]


def _temperature(params: dict[str, Any]) -> float:
    """The temperature vLLM sampled at: the request's, else vLLM's default of 1; a greedy
    request (0) is scored at 1, since its log-probs are the unscaled distribution's."""
    value = params.get("temperature")
    return float(value) if isinstance(value, int | float) and value > 0 else 1.0


def training_update_record_step(*, update: TrainingUpdate, metrics: dict[str, Any]) -> None:
    update.metrics = [*update.metrics, metrics]
    update.save(update_fields=["metrics"])


@transaction.atomic
def training_update_finish(
    *,
    update: TrainingUpdate,
    summary: dict[str, Any],
    adapter_dir: Path,
    probe: dict[str, float],
    passed: bool,
    reasons: list[str],
) -> PolicyVersion:
    """Record the finished update and its candidate version. Passed: its samples are consumed
    (once). Refused by the gate: they are given back, one refusal more each; those refused
    ``TRAIN_MAX_REFUSALS`` times are excluded with the gate's reasons.

    If an owner deleted a conversation while the update trained on its samples, the weights
    hold data the owner was told was never trained: the candidate is rejected, its adapter
    folder removed, and the remaining samples stay ready for the next update (no refusal is
    counted against them: the gate did not refuse them).
    """
    update = TrainingUpdate.objects.select_for_update().get(pk=update.pk)
    claimed = set(update.summary.get("sample_ids", []))
    # The same row locks the "My data" delete takes first: a delete either commits before this
    # (its samples are missing here) or waits for this to commit (and reports them trained).
    present = set(
        Sample.objects.select_for_update().filter(pk__in=claimed).values_list("pk", flat=True)
    )
    deleted = len(claimed - present)
    if deleted:
        passed = False
        reasons = [
            *reasons,
            f"{deleted} of its samples were deleted by their owners while it trained; "
            "its weights are discarded and its other samples go to the next update",
        ]
        shutil.rmtree(adapter_dir, ignore_errors=True)
    number = (PolicyVersion.objects.aggregate(n=Max("number"))["n"] or 0) + 1
    version = PolicyVersion.objects.create(
        number=number,
        owner_id=update.owner_id,
        adapter_path="" if deleted else str(adapter_dir),
        parent=update.base_version,
        status=PolicyVersion.Status.CANDIDATE if passed else PolicyVersion.Status.REJECTED,
        probe_metrics={**probe, "passed": passed, "reasons": reasons},
    )
    batch = Sample.objects.filter(pk__in=present, status=Sample.Status.READY)
    messages = list(batch.values_list("message__conversation_id", "message_id"))
    if passed:
        batch.update(status=Sample.Status.CONSUMED, update=update, consumed_at=timezone.now())
    elif not deleted:
        batch.update(refusals=F("refusals") + 1)
        # trainer.refusals.is_excluded, as a query
        batch.filter(refusals__gte=settings.TRAIN_MAX_REFUSALS).update(
            status=Sample.Status.EXCLUDED,
            update=update,
            exclusion_reason=(
                f"refused by the probe gate {settings.TRAIN_MAX_REFUSALS} times; last: "
                + "; ".join(reasons)
            )[:2000],
        )
    push_learning_status(messages=messages)
    update.status = TrainingUpdate.Status.DONE if passed else TrainingUpdate.Status.REJECTED
    update.produced_version = version
    update.summary = {**update.summary, **summary, "gate": {"passed": passed, "reasons": reasons}}
    update.finished_at = timezone.now()
    update.save(update_fields=["status", "produced_version", "summary", "finished_at"])
    return version


def training_update_fail(*, update_id: int, error: str) -> None:
    TrainingUpdate.objects.filter(pk=update_id).update(
        status=TrainingUpdate.Status.FAILED, error=error[:5000], finished_at=timezone.now()
    )


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


def base_probe_cached() -> dict[str, float] | None:
    """The base model's probe figures, measured once and kept on version 0 (None until then)."""
    base = PolicyVersion.objects.get(number=0)
    return base.probe_metrics if base.probe_metrics.get("probe_ppl") else None


def base_probe_store(*, probe: dict[str, float]) -> None:
    """Keep the base's probe figures on version 0; not its answers to one update's held-back
    prompts (``held_back_*``), which belong to that update alone."""
    kept = {key: value for key, value in probe.items() if not key.startswith("held_back")}
    PolicyVersion.objects.filter(number=0).update(probe_metrics=kept)
