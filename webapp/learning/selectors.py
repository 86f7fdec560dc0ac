"""Reads of the learning state that serving and the UI need."""

from __future__ import annotations

from collections.abc import Iterable

from webapp.learning.models import Judgement, PolicyVersion, Sample


def policy_version_live() -> PolicyVersion:
    """The version new requests are served by: the live adapter, else the base model (v0)."""
    live = PolicyVersion.objects.filter(status=PolicyVersion.Status.LIVE).first()
    if live is not None:
        return live
    base, _ = PolicyVersion.objects.get_or_create(
        number=0, defaults={"status": PolicyVersion.Status.LIVE}
    )
    return base


def learning_status(*, message_id: int) -> str:
    """What the learning loop has made of an answer, in a few words ("judged +1 · hint taken ·
    trained into v4"); empty when nothing yet."""
    return learning_statuses(message_ids=[message_id]).get(message_id, "")


def learning_statuses(*, message_ids: Iterable[int]) -> dict[int, str]:
    """``learning_status`` of many answers in two queries (a transcript shows them all)."""
    ids = list(message_ids)
    judgements: dict[int, Judgement] = {}
    for judgement in Judgement.objects.filter(message_id__in=ids).order_by("created_at", "id"):
        judgements[judgement.message_id] = judgement  # the newest wins
    samples: dict[int, Sample] = {}
    for sample in (
        Sample.objects.filter(message_id__in=list(judgements))
        .exclude(status=Sample.Status.SUPERSEDED)
        .select_related("update__produced_version")
        .order_by("created_at", "id")
    ):
        samples[sample.message_id] = sample
    return {
        message_id: _status(judgement, samples.get(message_id))
        for message_id, judgement in judgements.items()
    }


def _status(judgement: Judgement, sample: Sample | None) -> str:
    parts = [f"judged {judgement.score:+d}" if judgement.score else "judged 0"]
    if sample is not None and (sample.hint or sample.correction):
        parts.append("hint taken")
    if sample is not None and sample.status == sample.Status.EXCLUDED:
        parts.append("excluded from training")
    if sample is not None and sample.update and sample.update.produced_version:
        version = sample.update.produced_version
        if version.status == PolicyVersion.Status.REJECTED:
            parts.append(f"trained into {version.label} (not published: failed the probe gate)")
        else:
            parts.append(f"trained into {version.label}")
    return " · ".join(parts)
