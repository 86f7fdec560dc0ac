"""Reads of the learning state that serving and the UI need."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, Q

from trainer.algorithms import algorithm_get
from webapp.learning.models import Judgement, PolicyVersion, Sample
from webapp.replicas import lineage_key


def lineage_owner_id(*, user: Any) -> int | None:
    """Whose lineage a user's feedback trains and whose live version answers them: their own
    with ``PARLEY_LEARNING_SCOPE=user``, the shared one (None) with ``shared`` or no user.

    ``user``: a user, a user's id (an API key's ``owner_id``), or None / an anonymous user.
    """
    if settings.LEARNING_SCOPE != "user" or user is None:
        return None
    if isinstance(user, int):
        return user
    return user.pk if getattr(user, "is_authenticated", False) else None


def lineage_key_for(*, user: Any) -> str:
    """The key that routes a user's requests to their lineage's replica
    (``webapp.replicas``); ``user`` as in ``lineage_owner_id``."""
    return lineage_key(lineage_owner_id(user=user))


def policy_version_live(*, owner_id: int | None = None) -> PolicyVersion:
    """The version a lineage's new requests are served by and its next update starts from.

    The owner's live version; an owner with none yet (and the shared lineage, ``owner_id``
    None) gets the shared live version, and before anything was published, the base (v0).
    """
    if owner_id is not None:
        own = PolicyVersion.objects.filter(
            owner_id=owner_id, status=PolicyVersion.Status.LIVE
        ).first()
        if own is not None:
            return own
    live = PolicyVersion.objects.filter(
        owner__isnull=True, status=PolicyVersion.Status.LIVE
    ).first()
    if live is not None:
        return live
    base, _ = PolicyVersion.objects.get_or_create(
        number=0, defaults={"status": PolicyVersion.Status.LIVE}
    )
    return base


def policy_version_for(*, user: Any) -> PolicyVersion:
    """The version that answers this user's ``model="parley"`` (their lineage's live one)."""
    return policy_version_live(owner_id=lineage_owner_id(user=user))


def versions_behind(*, version: PolicyVersion, live: PolicyVersion) -> int:
    """How many versions of ``live``'s lineage came after ``version`` up to ``live``.

    The shared lineage counts by number (as before lineages; its versions were numbered one
    after another); a user's lineage counts its own versions, since other users' versions
    take numbers in between.
    """
    if live.owner_id is None:
        return live.number - version.number
    return PolicyVersion.objects.filter(
        owner_id=live.owner_id, number__gt=version.number, number__lte=live.number
    ).count()


def learning_status(*, message_id: int) -> LearningStatus | None:
    """What the learning loop has made of an answer; None before it was judged."""
    return learning_statuses(message_ids=[message_id]).get(message_id)


def learning_statuses(*, message_ids: Iterable[int]) -> dict[int, LearningStatus]:
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


def sample_counts(*, owner_id: int | None = None) -> dict[str, int]:
    """Where every sample stands (``owner_id``: only those from that user's conversations);
    trained + waiting + excluded = total, so none is lost.

    Trained: consumed by a published-or-candidate version that passed the gate. Waiting: ready
    (new, or given back by a refused update). Excluded: never to be trained, each with its
    ``exclusion_reason`` (refused too often, excluded by an admin, or superseded by a newer
    judgement of the same answer, which carries its feedback on).
    """
    samples = Sample.objects.all()
    if owner_id is not None:
        samples = samples.filter(message__conversation__owner_id=owner_id)
    by_status = dict(
        samples.values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    unused = unused_by_algorithm(settings.TRAIN_ALGORITHM)
    return {
        "trained": by_status.get(Sample.Status.CONSUMED, 0),
        "waiting": by_status.get(Sample.Status.READY, 0),
        # waiting, but of a shape the configured algorithm never claims (a 👍 alone under opd)
        "unused_by_algorithm": (
            samples.filter(unused, status=Sample.Status.READY).count() if unused else 0
        ),
        "excluded": by_status.get(Sample.Status.EXCLUDED, 0)
        + by_status.get(Sample.Status.SUPERSEDED, 0),
        "excluded_without_reason": samples.filter(
            status__in=[Sample.Status.EXCLUDED, Sample.Status.SUPERSEDED], exclusion_reason=""
        ).count(),
        "refused_waiting": samples.filter(status=Sample.Status.READY, refusals__gt=0).count(),
        "total": sum(by_status.values()),
    }


def unused_by_algorithm(algorithm: str) -> Q:
    """The samples of a shape the algorithm never claims, as a filter (empty when it claims
    every shape): under one that uses no reward (``opd``) a 👍 or 👎 alone, under one that
    uses no hint (``rl``) a hint-only OPD sample. The claim leaves these out
    (``workflows.claiming.claimable_samples``) and the counts name them; the words for
    each are ``trainer.algorithms.Algorithm.unused_reason``."""
    chosen = algorithm_get(algorithm)
    unused = Q()
    if not chosen.uses_reward:
        unused |= Q(hint="", correction="")
    if not chosen.uses_hint:
        unused |= Q(kind=Sample.Kind.OPD, correction="")
    return unused


def sample_unused_reason(*, kind: str, hint: str, correction: str) -> str:
    """Why the configured algorithm (``PARLEY_TRAIN_ALGORITHM``) never trains a ready sample
    of this shape, or "": it stays ready, kept for an algorithm that uses it."""
    return algorithm_get(settings.TRAIN_ALGORITHM).unused_reason(
        kind=kind, has_hint=bool(hint), has_correction=bool(correction)
    )


@dataclass(frozen=True)
class LearningStatus:
    """What the learning loop made of an answer: ``text`` in plain words for the person who
    wrote the feedback ("Learnt in version 3"), ``detail`` for whoever wants to know how
    ("judged -1 · hint taken · trained into v3")."""

    text: str
    detail: str


def _plain(sample: Sample | None, *, unused: str) -> str:
    if sample is None:
        return "Read: nothing to learn from it"
    if sample.status in (Sample.Status.EXCLUDED, Sample.Status.SUPERSEDED):
        return "Not used for learning"
    if sample.status == Sample.Status.READY:
        if unused:
            return "Kept: the current training does not use it"
        if sample.refusals:
            return "Will be learnt in a later update"
        return "Will be learnt in the next update"
    version = sample.update.produced_version if sample.update else None
    if version is None:
        return "Being learnt"
    if version.status == PolicyVersion.Status.REJECTED:
        return f"Tried in version {version.number}, which did not pass the checks"
    return f"Learnt in version {version.number}"


def _status(judgement: Judgement, sample: Sample | None) -> LearningStatus:
    parts = [f"judged {judgement.score:+d}" if judgement.score else "judged 0"]
    if sample is not None and (sample.hint or sample.correction):
        parts.append("hint taken")
    if sample is not None and sample.status == sample.Status.READY and sample.refusals:
        parts.append(f"waiting to train again (refused by the gate {sample.refusals}×)")
    unused = ""
    if sample is not None and sample.status == sample.Status.READY:
        unused = sample_unused_reason(
            kind=sample.kind, hint=sample.hint, correction=sample.correction
        )
    if unused:
        parts.append(f"not trained: {unused}")
    if sample is not None and sample.status == sample.Status.EXCLUDED:
        reason = f": {sample.exclusion_reason}" if sample.exclusion_reason else ""
        parts.append(f"excluded from training{reason}")
    if sample is not None and sample.update and sample.update.produced_version:
        version = sample.update.produced_version
        if version.status == PolicyVersion.Status.REJECTED:
            parts.append(f"trained into {version.label} (not published: failed the probe gate)")
        else:
            parts.append(f"trained into {version.label}")
    detail = " · ".join(parts)
    return LearningStatus(text=_plain(sample, unused=unused), detail=detail)
