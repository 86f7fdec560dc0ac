"""What "My model" shows: a lineage's versions with what taught each, its refused candidates,
and the user's samples still waiting or excluded.

The lineage is the signed-in user's own (``PARLEY_LEARNING_SCOPE=user``) or the shared one
(``shared``). Version numbers are global, so each version also gets its ordinal in the lineage
(v1, v2, … in the order they were made). "What taught it" counts the feedback behind the samples
its update trained (the batch fixed when it started, ``summary["sample_ids"]``, and any sample
consumed or excluded under it): each sample counts once per kind of feedback its answer's owner
gave, and once as "next state" when the judge scored it from the conversation's next message.
Links to turns only ever go to the user's own conversations, even for a shared version trained
on everyone's feedback.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F
from django.http import Http404

from webapp.chat.models import Feedback, Message
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import lineage_owner_id, sample_unused_reason

TURNS_SHOWN = 200
SAMPLES_SHOWN = 50
FEEDBACK_KINDS = ("up", "down", "comments", "corrections", "next_state", "chosen")


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


def lineage_versions(*, owner_id: int | None) -> list[PolicyVersion]:
    """The lineage's versions, oldest first (the shared lineage without the base model v0)."""
    versions = PolicyVersion.objects.filter(owner_id=owner_id).order_by("number")
    if owner_id is None:
        versions = versions.exclude(number=0)
    return list(versions)


def version_sample_ids(update: TrainingUpdate | None) -> list[int]:
    """The samples an update trained: its batch, and any consumed or excluded under it."""
    if update is None:
        return []
    under = {update.pk: set(Sample.objects.filter(update=update).values_list("pk", flat=True))}
    return _batch(update, under)


def _batch(update: TrainingUpdate, under: dict[int, set[int]]) -> list[int]:
    ids = {i for i in update.summary.get("sample_ids", []) if isinstance(i, int)}
    return sorted(ids | under.get(update.pk, set()))


def feedback_taught(sample_ids: list[int]) -> dict[int, dict[str, int]]:
    """Per sample still stored: which kinds of feedback it carried (0 or 1 each)."""
    samples = list(
        Sample.objects.filter(pk__in=sample_ids).values_list("pk", "message_id", "judgement_id")
    )
    sources = dict(
        Judgement.objects.filter(pk__in=[j for _, _, j in samples]).values_list("pk", "source")
    )
    feedback = {
        f.message_id: f
        for f in Feedback.objects.filter(
            message_id__in=[m for _, m, _ in samples],
            author_id=F("message__conversation__owner_id"),
        )
    }
    out = {}
    for pk, message_id, judgement_id in samples:
        given = feedback.get(message_id)
        out[pk] = {
            "up": int(given is not None and given.rating == 1),
            "down": int(given is not None and given.rating == -1),
            "comments": int(given is not None and bool(given.comment)),
            "corrections": int(given is not None and bool(given.correction)),
            "next_state": int(sources.get(judgement_id) == Judgement.Source.PRM),
            "chosen": int(sources.get(judgement_id) == Judgement.Source.CHOSEN),
        }
    return out


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
    trained = {v.pk: _batch(updates[v.pk], under) if v.pk in updates else [] for v in versions}
    taught = feedback_taught([i for ids in trained.values() for i in ids])
    rows = []
    for ordinal, version in enumerate(versions, start=1):
        counts: Counter[str] = Counter(dict.fromkeys(FEEDBACK_KINDS, 0))
        for sample_id in trained[version.pk]:
            counts.update(taught.get(sample_id, {}))
        rows.append(
            VersionRow(
                version=version,
                ordinal=ordinal,
                status=version.get_status_display().lower(),
                when=version.published_at or version.created_at,
                taught=dict(counts),
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
    a ready one the configured algorithm never claims carries why in ``unused_reason``."""
    samples = list(
        Sample.objects.filter(
            message__conversation__owner=user,
            status__in=[Sample.Status.READY, Sample.Status.EXCLUDED, Sample.Status.SUPERSEDED],
        )
        .select_related("message__conversation")
        .order_by("-created_at", "-pk")[:SAMPLES_SHOWN]
    )
    for sample in samples:
        sample.unused_reason = (
            sample_unused_reason(kind=sample.kind, hint=sample.hint, correction=sample.correction)
            if sample.status == Sample.Status.READY
            else ""
        )
    return samples
