"""What taught a version: the feedback behind the samples its update trained.

The samples an update trained are its batch (fixed when it started, ``summary["sample_ids"]``)
and any sample consumed or excluded under it. Each counts once per kind of feedback its
answer's owner gave, once as "next state" when the judge scored it from the conversation's
next message, and once as "chosen" when it was the answer chosen over a 👎.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from django.db.models import F

from webapp.chat.models import Feedback
from webapp.learning.models import Judgement, Sample, TrainingUpdate

FEEDBACK_KINDS = ("up", "down", "comments", "corrections", "next_state", "chosen")


def version_sample_ids(update: TrainingUpdate | None) -> list[int]:
    """The samples an update trained: its batch, and any consumed or excluded under it."""
    if update is None:
        return []
    under = {update.pk: set(Sample.objects.filter(update=update).values_list("pk", flat=True))}
    return update_batch(update, under)


def update_batch(update: TrainingUpdate, under: dict[int, set[int]]) -> list[int]:
    """``version_sample_ids`` with the samples under each update already read (``under``:
    update id → sample ids), for many updates at once."""
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


def taught_counts(sample_ids: Iterable[int], taught: dict[int, dict[str, int]]) -> dict[str, int]:
    """Each kind of feedback summed over the samples (every kind present, 0 where none)."""
    counts: Counter[str] = Counter(dict.fromkeys(FEEDBACK_KINDS, 0))
    for sample_id in sample_ids:
        counts.update(taught.get(sample_id, {}))
    return dict(counts)
