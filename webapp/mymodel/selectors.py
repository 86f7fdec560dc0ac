"""What "My model" shows: a lineage's versions with what taught each, its refused candidates,
and the user's samples still waiting or excluded.

The lineage is the signed-in user's own (``PARLEY_LEARNING_SCOPE=user``) or the shared one
(``shared``). Version numbers are global, so each version also gets its ordinal in the lineage
(v1, v2, … in the order they were made). "What taught it" counts the feedback behind the samples
its update trained (``webapp.learning.taught``). Links to turns only ever go to the user's own
conversations, even for a shared version trained on everyone's feedback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.http import Http404

from webapp.chat.models import Message
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.plain_words import (
    exclusion_words,
    refusals_words,
    taught_words,
    waiting_words,
)
from webapp.learning.preferences import learning_paused
from webapp.learning.selectors import lineage_owner_id, sample_unused_reason
from webapp.learning.taught import (
    feedback_taught,
    taught_counts,
    update_batch,
    version_sample_ids,
)

TURNS_SHOWN = 200
SAMPLES_SHOWN = 50


@dataclass(frozen=True)
class VersionRow:
    version: PolicyVersion
    ordinal: int
    status: str
    when: datetime
    taught: dict[str, int]
    trained_samples: int
    reasons: list[str] = field(default_factory=list)
    can_roll_back: bool = False

    @property
    def label(self) -> str:
        return f"v{self.ordinal}"

    @property
    def taught_words(self) -> str:
        return taught_words(self.taught)

    @property
    def reasons_words(self) -> list[str]:
        """Why the gate refused it, in plain words."""
        return refusals_words(self.reasons)

    @property
    def status_words(self) -> str:
        return {
            PolicyVersion.Status.LIVE: "answering you now",
            PolicyVersion.Status.CANDIDATE: "going live",
            PolicyVersion.Status.RETIRED: "replaced by a newer one",
            PolicyVersion.Status.ROLLED_BACK: "set aside",
            PolicyVersion.Status.REJECTED: "not used",
        }.get(self.version.status, self.status)


def lineage_versions(*, owner_id: int | None) -> list[PolicyVersion]:
    """The lineage's versions, oldest first (the shared lineage without the base model v0)."""
    versions = PolicyVersion.objects.filter(owner_id=owner_id).order_by("number")
    if owner_id is None:
        versions = versions.exclude(number=0)
    return list(versions)


def gate_reasons(version: PolicyVersion) -> list[str]:
    """Why the gate refused the version, as recorded (none for a version without metrics)."""
    reasons = version.probe_metrics.get("reasons")
    return [str(r) for r in reasons] if isinstance(reasons, list) else []


def lineage_rows(*, user: Any) -> list[VersionRow]:
    """The user's lineage (or the shared one), newest first, each with what taught it."""
    owner_id = lineage_owner_id(user=user)
    versions = lineage_versions(owner_id=owner_id)
    updates = {
        u.produced_version_id: u
        for u in TrainingUpdate.objects.filter(produced_version__in=versions)
    }
    # One query for every update's samples, however long the lineage.
    under: dict[int, set[int]] = {}
    for update_id, sample_id in Sample.objects.filter(
        update__in=list(updates.values())
    ).values_list("update_id", "pk"):
        under.setdefault(update_id, set()).add(sample_id)
    trained = {
        v.pk: update_batch(updates[v.pk], under) if v.pk in updates else [] for v in versions
    }
    taught = feedback_taught([i for ids in trained.values() for i in ids])
    rows = []
    for ordinal, version in enumerate(versions, start=1):
        rows.append(
            VersionRow(
                version=version,
                ordinal=ordinal,
                status=version.get_status_display().lower(),
                when=version.published_at or version.created_at,
                taught=taught_counts(trained[version.pk], taught),
                trained_samples=sum(1 for i in trained[version.pk] if i in taught),
                reasons=gate_reasons(version),
                can_roll_back=owner_id is not None
                and version.status
                in (PolicyVersion.Status.RETIRED, PolicyVersion.Status.ROLLED_BACK),
            )
        )
    rows.reverse()
    return rows


def version_get_for_user(*, user: Any, pk: int) -> PolicyVersion:
    """One version of the lineage the user is shown (their own, or the shared one in
    ``shared`` scope); anyone else's, and the base model, answer 404."""
    try:
        version = PolicyVersion.objects.get(pk=pk, owner_id=lineage_owner_id(user=user))
    except PolicyVersion.DoesNotExist as exc:
        raise Http404("No such version") from exc
    if version.number == 0:
        raise Http404("No such version")
    return version


def version_ordinal(version: PolicyVersion) -> int:
    """The version's place in its lineage (1 for the first), as the page numbers it."""
    return sum(1 for v in lineage_versions(owner_id=version.owner_id) if v.number <= version.number)


def version_turns(*, version: PolicyVersion, user: Any) -> list[Message]:
    """The user's own answers whose samples the version's update trained, oldest first."""
    update = TrainingUpdate.objects.filter(produced_version=version).first()
    return list(
        Message.objects.filter(samples__pk__in=version_sample_ids(update), conversation__owner=user)
        .select_related("conversation")
        .distinct()
        .order_by("created_at", "pk")[:TURNS_SHOWN]
    )


def samples_not_trained(*, user: Any) -> list[Sample]:
    """The user's samples still waiting (ready) or excluded, newest first, with their answers;
    a ready one the configured algorithm never claims carries why in ``unused_reason``, and each
    where it stands in plain words in ``plain_reason``."""
    paused = learning_paused(user_id=user.pk)
    samples = list(
        Sample.objects.filter(
            message__conversation__owner=user,
            status__in=[Sample.Status.READY, Sample.Status.EXCLUDED, Sample.Status.SUPERSEDED],
        )
        .select_related("message__conversation")
        .order_by("-created_at", "-pk")[:SAMPLES_SHOWN]
    )
    learning_now = _in_running_batches()
    for sample in samples:
        sample.unused_reason = (
            sample_unused_reason(kind=sample.kind, hint=sample.hint, correction=sample.correction)
            if sample.status == Sample.Status.READY
            else ""
        )
        sample.plain_reason = (
            exclusion_words(sample)
            if sample.status != Sample.Status.READY
            else "being learnt now"
            if sample.pk in learning_now
            else waiting_words(sample, paused=paused)
        )
    return samples


def _in_running_batches() -> set[int]:
    """The samples in the batch of an update running now (still ready until it finishes)."""
    summaries = TrainingUpdate.objects.filter(status=TrainingUpdate.Status.RUNNING).values_list(
        "summary", flat=True
    )
    return {
        pk
        for summary in summaries
        if isinstance(summary, dict)
        for pk in summary.get("sample_ids", [])
        if isinstance(pk, int)
    }
