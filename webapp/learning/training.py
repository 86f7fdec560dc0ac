"""Training updates and policy versions: when to train, which samples, and publishing.

- Trigger: ready samples reach ``PARLEY_TRAIN_BATCH_SIZE``, or the oldest has waited
  ``PARLEY_TRAIN_MAX_WAIT_S``; one update is queued at a time (single flight).
- The update itself runs under a PostgreSQL advisory lock held by the train worker's
  connection: never two updates at once, and a worker that dies releases it with its connection.
- Samples are consumed exactly once: the batch is chosen when the update starts, but samples are
  marked consumed only in the transaction that records the finished update. A crashed update
  leaves them ready; a redelivered task for a finished update trains nothing again, and only
  publishes the version if the worker died before it was published.
- Publishing loads the adapter into every serving replica first; only then does the version
  become live. Rollback is the same path for an older version.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min
from django.utils import timezone

from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.notify import push_learning_status
from webapp.learning.selectors import policy_version_live

TRAINING_LOCK_KEY = 0x5041524C  # "PARL": the advisory lock id for single-flight training


class PublishFailed(RuntimeError):
    """A serving replica refused the adapter; the version stays as it was."""


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
    from trainer.config import UpdateConfig

    overrides: dict[str, Any] = {"algorithm": settings.TRAIN_ALGORITHM}
    if settings.TRAIN_LR:
        overrides["lr"] = settings.TRAIN_LR
    if settings.TRAIN_STEPS:
        overrides["steps_per_batch"] = settings.TRAIN_STEPS
    return dataclasses.asdict(UpdateConfig(**overrides))


@transaction.atomic
def training_update_maybe_queue(*, force: bool = False) -> TrainingUpdate | None:
    """Queue an update when enough samples are ready (or waited long enough); one at a time."""
    ready = Sample.objects.filter(status=Sample.Status.READY)
    stats = ready.aggregate(oldest=Min("created_at"))
    count = ready.count()
    if count == 0:
        return None
    waited = (timezone.now() - stats["oldest"]).total_seconds()
    if not force and count < settings.TRAIN_BATCH_SIZE and waited < settings.TRAIN_MAX_WAIT_S:
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
        algorithm=config["algorithm"], config=config, base_version=policy_version_live()
    )
    from trainer.tasks.training import train_update

    transaction.on_commit(lambda: train_update.delay(update.pk))
    return update


@transaction.atomic
def training_update_claim(*, update_id: int) -> TrainingUpdate | None:
    """Mark the update running and fix its batch; None when it already finished."""
    update = TrainingUpdate.objects.select_for_update().get(pk=update_id)
    if update.status not in (TrainingUpdate.Status.QUEUED, TrainingUpdate.Status.RUNNING):
        return None
    ids = list(
        Sample.objects.filter(status=Sample.Status.READY)
        .order_by("created_at")
        .values_list("pk", flat=True)[: settings.TRAIN_BATCH_SIZE]
    )
    update.status = TrainingUpdate.Status.RUNNING
    update.started_at = timezone.now()
    update.summary = {**update.summary, "sample_ids": ids}
    update.metrics = []
    update.save(update_fields=["status", "started_at", "summary", "metrics"])
    return update


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
    live = policy_version_live()
    return version if live.number < version.number else None


def batch_for_update(*, update: TrainingUpdate, tokenizer: Any) -> list[Any]:
    """The update's samples as trainer.batch.TrainingSample (the sampled tokens as served)."""
    from trainer.batch import TrainingSample, hinted_prompt_ids

    samples = Sample.objects.filter(pk__in=update.summary.get("sample_ids", [])).order_by("pk")
    batch = []
    for sample in samples:
        if not sample.prompt_token_ids or not sample.response_token_ids:
            continue
        hint = sample.hint or None
        correction_ids = None
        if sample.correction:
            correction_ids = tokenizer.encode(sample.correction, add_special_tokens=False)
            if tokenizer.eos_token_id is not None:
                correction_ids.append(tokenizer.eos_token_id)
        batch.append(
            TrainingSample(
                prompt_token_ids=list(sample.prompt_token_ids),
                response_token_ids=list(sample.response_token_ids),
                sampler_logprobs=[float(x) for x in sample.response_logprobs],
                reward=sample.reward if sample.kind != Sample.Kind.OPD else None,
                hint=hint,
                teacher_prompt_token_ids=(
                    hinted_prompt_ids(tokenizer, sample.prompt_messages, hint) if hint else None
                ),
                correction_token_ids=correction_ids,
                group_id=sample.group_key or None,
            )
        )
    return batch


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
    """Record the finished update, its candidate version, and consume its samples (once)."""
    update = TrainingUpdate.objects.select_for_update().get(pk=update.pk)
    number = (PolicyVersion.objects.aggregate(n=Max("number"))["n"] or 0) + 1
    version = PolicyVersion.objects.create(
        number=number,
        adapter_path=str(adapter_dir),
        parent=update.base_version,
        status=PolicyVersion.Status.CANDIDATE if passed else PolicyVersion.Status.REJECTED,
        probe_metrics={**probe, "passed": passed, "reasons": reasons},
    )
    Sample.objects.filter(
        pk__in=update.summary.get("sample_ids", []), status=Sample.Status.READY
    ).update(status=Sample.Status.CONSUMED, update=update, consumed_at=timezone.now())
    push_learning_status(
        messages=Sample.objects.filter(update=update).values_list(
            "message__conversation_id", "message_id"
        )
    )
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


def policy_version_publish(*, version: PolicyVersion) -> PolicyVersion:
    """Load the version into every serving replica, then make it the live one.

    Publishing never interrupts serving: vLLM keeps answering while an adapter loads, new
    requests ask for the new adapter's name, and requests in flight finish on the one they
    started with. If any replica refuses, nothing changes.
    """
    from trainer.publish import PublishError, push

    if version.status == PolicyVersion.Status.REJECTED:
        raise PublishFailed(f"{version.label} failed the probe gate and cannot be published")
    if version.number != 0:
        try:
            push(
                version.adapter_path,
                lora_name=version.served_name(settings.PARLEY_MODEL_ID),
                serving_urls=settings.VLLM_BASE_URLS,
                timeout=60,
                api_key=settings.VLLM_API_KEY,
            )
        except PublishError as exc:
            if "already" not in str(exc).lower():
                raise PublishFailed(str(exc)) from exc
    with transaction.atomic():
        PolicyVersion.objects.select_for_update().filter(status=PolicyVersion.Status.LIVE).exclude(
            pk=version.pk
        ).update(status=PolicyVersion.Status.RETIRED)
        version.status = PolicyVersion.Status.LIVE
        version.published_at = timezone.now()
        version.save(update_fields=["status", "published_at"])
    return version
