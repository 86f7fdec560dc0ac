"""Finish and publish, the last stage of an update: record the candidate, then make it live.

Finishing records the update and its candidate ``PolicyVersion`` in one transaction. Samples are
consumed exactly once, there: a crashed update leaves them ready, a redelivered task for a
finished update trains nothing again. No feedback is lost: an update the gate refuses gives its
samples back (ready again, one more refusal each, trained later at a smaller step); a sample
refused ``PARLEY_TRAIN_MAX_REFUSALS`` times is excluded, with the gate's reasons as its reason.

Publishing loads the version's adapter into its lineage's home replica (``webapp.replicas``:
the first of the lineage's order that answers; the shared lineage's into every replica that
answers, since it serves everyone everywhere), then makes it live. It never interrupts serving:
vLLM keeps answering while an adapter loads, new requests ask for the new adapter's name, and
requests in flight finish on the one they started with. A replica that does not have the
version yet (one that was down, or a fallback) loads it on the first request that asks for it
(``webapp.inference.adapter_load``), so no request fails for it. If a replica refuses, or none
answers, nothing changes. Rollback is the same path for an older version. Versions that are no
longer live leave the replicas later (``workflows.residency``).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Max
from django.utils import timezone

from trainer import publish
from webapp import replicas
from webapp.learning.distillation import memories_learnt_record
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.notify import push_learning_status
from webapp.learning.selectors import policy_version_live

VERSION_NUMBER_LOCK_KEY = 0x5041524E  # "PARN": numbering versions, one finish at a time


class PublishFailed(RuntimeError):
    """A serving replica refused the adapter; the version stays as it was."""


class AdapterPush(Protocol):
    """Loads an adapter folder into each replica of ``serving_urls`` under ``lora_name``
    (trainer.publish.push); ReplicaUnreachable for one that did not answer."""

    def __call__(
        self,
        adapter_dir: str | Path,
        *,
        lora_name: str,
        serving_urls: Sequence[str],
        timeout: float = ...,
        api_key: str = ...,
    ) -> list[dict[str, Any]]: ...


def policy_version_publish(
    *, version: PolicyVersion, push: AdapterPush | None = None
) -> PolicyVersion:
    """Load the version into its lineage's home replica (``push``, the real one by default),
    then make it the live one of its lineage (rollback: an older version of it); PublishFailed
    when it failed the gate, a replica refused it or none answered."""
    push = publish.push if push is None else push
    if version.status == PolicyVersion.Status.REJECTED:
        raise PublishFailed(f"{version.label} failed the probe gate and cannot be published")
    if version.number != 0:
        adapter_load_home(version=version, push=push)
    with transaction.atomic():
        # Only the version's own lineage changes: other users keep theirs.
        now = timezone.now()
        PolicyVersion.objects.select_for_update().filter(
            status=PolicyVersion.Status.LIVE, owner_id=version.owner_id
        ).exclude(pk=version.pk).update(status=PolicyVersion.Status.RETIRED, retired_at=now)
        version.status = PolicyVersion.Status.LIVE
        version.published_at = now
        version.retired_at = None
        version.save(update_fields=["status", "published_at", "retired_at"])
        memories_learnt_record(version=version)
    return version


def adapter_load_home(*, version: PolicyVersion, push: AdapterPush) -> list[str]:
    """Load a version's adapter where its lineage is served; the replicas that hold it.

    A user's version: the first replica of its lineage's order that answers (its home, or the
    replica its requests fall back to while the home is down). The shared lineage's: every
    replica that answers. A replica that does not answer is passed over and remembered as
    down; one that refuses fails the publish (PublishFailed), as does finding none.
    """
    lineage = replicas.lineage_key(version.owner_id)
    if lineage == replicas.SHARED_LINEAGE:
        order = replicas.down.last(settings.VLLM_BASE_URLS)
    else:
        order = replicas.down.last(replicas.rendezvous_order(lineage, settings.VLLM_BASE_URLS))
    loaded: list[str] = []
    unreachable: list[str] = []
    for replica in order:
        try:
            push(
                version.adapter_path,
                lora_name=version.served_name(settings.PARLEY_MODEL_ID),
                serving_urls=[replica],
                timeout=60,
                api_key=settings.VLLM_API_KEY,
            )
        except publish.ReplicaUnreachable as exc:
            replicas.down.mark(replica)
            unreachable.append(str(exc))
            continue
        except publish.PublishError as exc:
            if "already" not in str(exc).lower():
                raise PublishFailed(str(exc)) from exc
        loaded.append(replica)
        if lineage != replicas.SHARED_LINEAGE:
            break
    if not loaded:
        raise PublishFailed("no serving replica answered: " + "; ".join(unreachable))
    return loaded


@transaction.atomic
def policy_lineage_reset(*, owner_id: int) -> PolicyVersion | None:
    """Take a user's lineage back to the shared model: their live version is marked rolled
    back, so their requests and their next update use the shared live version again. Their
    versions stay (nothing is wiped; any can be published again). The version that was live,
    or None when they had none."""
    live = (
        PolicyVersion.objects.select_for_update()
        .filter(owner_id=owner_id, status=PolicyVersion.Status.LIVE)
        .first()
    )
    if live is not None:
        live.status = PolicyVersion.Status.ROLLED_BACK
        live.retired_at = timezone.now()
        live.save(update_fields=["status", "retired_at"])
    return live


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
    with connection.cursor() as cursor:  # updates of other lineages finish alongside
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [VERSION_NUMBER_LOCK_KEY])
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
