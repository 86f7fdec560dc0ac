"""Reads of the learning state that serving and the UI need."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Q

from trainer.algorithms import algorithm_get
from webapp.chat.models import Feedback, Message
from webapp.learning.evidence import evidence_facts, evidence_fingerprint, has_evidence
from webapp.learning.models import Judgement, PolicyVersion, Sample
from webapp.learning.secret_guard import holds_secret
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
    """What the learning loop has made of an answer, or is about to (feedback saved and not
    judged yet); None while there is nothing to tell."""
    return learning_statuses(message_ids=[message_id]).get(message_id)


def learning_statuses(*, message_ids: Iterable[int]) -> dict[int, LearningStatus]:
    """``learning_status`` of many answers in a fixed number of queries (a transcript shows
    them all): three, and one more when some feedback is newer than its answer's judgement."""
    ids = list(message_ids)
    judgements: dict[int, Judgement] = {}
    judged: dict[int, set[str]] = {}
    for judgement in Judgement.objects.filter(message_id__in=ids).order_by("created_at", "id"):
        judgements[judgement.message_id] = judgement  # the newest wins
        judged.setdefault(judgement.message_id, set()).add(judgement.fingerprint)
    samples: dict[int, Sample] = {}
    for sample in (
        Sample.objects.filter(message_id__in=list(judgements))
        .exclude(status=Sample.Status.SUPERSEDED)
        .select_related("update__produced_version")
        .order_by("created_at", "id")
    ):
        samples[sample.message_id] = sample
    feedback = {
        given.message_id: given
        for given in Feedback.objects.filter(
            message_id__in=ids, author_id=F("message__conversation__owner_id")
        )
    }
    # Feedback given or changed after the newest judgement: has the judge read it yet?
    newer = [
        message_id
        for message_id, given in feedback.items()
        if message_id not in judgements or given.updated_at > judgements[message_id].created_at
    ]
    answers = {
        pk: (next_state_id, skip_reason)
        for pk, next_state_id, skip_reason in Message.objects.filter(pk__in=newer).values_list(
            "pk", "next_state_id", "judging_skip_reason"
        )
    }
    statuses = {}
    for message_id in ids:
        given = feedback.get(message_id)
        judgement = judgements.get(message_id)
        status = None
        if message_id in answers:
            next_state_id, skip_reason = answers[message_id]
            status = _unread(
                facts=evidence_facts(next_state_id=next_state_id, feedback=given),
                judged=judged.get(message_id, set()),
                skip_reason=skip_reason,
                newest=judgement,
            )
        if status is None and judgement is not None:
            status = _status(judgement, samples.get(message_id), feedback=given)
        if status is not None:
            statuses[message_id] = status
    return statuses


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
    wrote the feedback ("Learnt in version 3"; "Read from your next message: …" where they
    gave none and the judge read their reply), ``detail`` for whoever wants to know how
    ("judged -1 · hint taken · trained into v3"). ``pending``: the newest feedback is saved but
    not judged yet, so the page asks again in a moment."""

    text: str
    detail: str
    pending: bool = False


PENDING = "Saved · Parley is reading it…"
WITHDRAWN = "Withdrawn: nothing is learnt from it"
_VERDICT = {1: "good", -1: "not what you wanted", 0: "neither good nor bad"}


def _unread(
    *, facts: dict[str, Any], judged: set[str], skip_reason: str, newest: Judgement | None
) -> LearningStatus | None:
    """The status of feedback newer than the answer's ``newest`` judgement, or None when that
    judgement still tells it: it was judged on this very evidence before, or the judge left
    the answer alone with a reason."""
    if evidence_fingerprint(facts) in judged:
        return None
    if skip_reason:
        if newest is not None or not has_evidence(facts):
            return None
        return LearningStatus(text="Saved · not used for learning", detail=skip_reason)
    if has_evidence(facts):
        return LearningStatus(text=PENDING, detail="feedback saved, not judged yet", pending=True)
    if newest is not None:
        return LearningStatus(text=WITHDRAWN, detail="feedback withdrawn")
    return None


def _fate(sample: Sample | None, *, unused: str) -> str:
    if sample is None:
        return "Read: nothing to learn from it"
    if sample.status in (Sample.Status.EXCLUDED, Sample.Status.SUPERSEDED):
        if holds_secret(sample.exclusion_reason):
            return "Not learnt from: it holds what looks like a secret"
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


def _read_from(judgement: Judgement) -> tuple[str, str]:
    """Where the judge read the verdict, for a judgement the user did not give with a thumb:
    the plain words' prefix and the detail's suffix ("", "" for a rating of theirs)."""
    if judgement.source == Judgement.Source.FEEDBACK:
        return "", ""
    if judgement.source == Judgement.Source.SESSION_END:
        return "Read when the conversation ended", " when the conversation ended"
    if judgement.next_state_text.startswith("[user feedback]"):
        return "Read from your comment", " from your comment"
    return "Read from your next message", " from your next message"


def _plain(judgement: Judgement, sample: Sample | None, *, unused: str) -> str:
    fate = _fate(sample, unused=unused)
    prefix, _ = _read_from(judgement)
    if not prefix:
        return fate
    if sample is None:
        votes = [v for v in judgement.votes if isinstance(v, dict)]
        if votes and all(v.get("score") is None for v in votes):
            return f"{prefix}: Parley could not tell whether it was good"
        return f"{prefix}: nothing to learn from it"
    verdict = _VERDICT.get(judgement.score, _VERDICT[0])
    if not judgement.score and (sample.hint or sample.correction):
        verdict = "a hint of what you wanted"
    return f"{prefix}: {verdict} · {fate[0].lower()}{fate[1:]}"


def _status(judgement: Judgement, sample: Sample | None, *, feedback: Any) -> LearningStatus:
    _, where = _read_from(judgement)
    parts = [f"judged {judgement.score:+d}{where}" if judgement.score else f"judged 0{where}"]
    votes = [v for v in judgement.votes if isinstance(v, dict)]
    unread = sum(1 for v in votes if v.get("score") is None)
    if unread:
        parts.append(f"{len(votes) - unread} of {len(votes)} votes read")
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
    withdrawn = (
        sample is None
        and judgement.source == Judgement.Source.FEEDBACK
        and not has_evidence(evidence_facts(next_state_id=None, feedback=feedback))
    )
    if withdrawn:
        return LearningStatus(text=WITHDRAWN, detail=f"{detail} · feedback withdrawn")
    return LearningStatus(text=_plain(judgement, sample, unused=unused), detail=detail)
