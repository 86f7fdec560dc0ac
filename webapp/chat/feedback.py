"""The only writer of feedback: a person's 👍/👎, reason tags, comment and correction on an
answer. Each change keeps the earlier states (``FEEDBACK_HISTORY_MAX``) and queues the answer's
judging once the transaction commits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction

from webapp.chat.feedback_spec import FeedbackInvalid, check_changes, feedback_state
from webapp.chat.models import Feedback, Message
from webapp.core.outbox import Task, enqueue


def _clean_tags(tags: Iterable[str], allowed: Iterable[str]) -> list[str]:
    allowed_set = set(allowed)
    cleaned: list[str] = []
    for tag in tags:
        if tag not in allowed_set:
            raise FeedbackInvalid(f"unknown reason tag {tag!r}")
        if tag not in cleaned:
            cleaned.append(tag)
    return cleaned


@transaction.atomic
def feedback_set(
    *,
    message: Message,
    author: Any,
    tags: Iterable[str] | None = None,
    allowed_tags: Iterable[str] = (),
    **changes: int | str | None,
) -> Feedback:
    """Create or change ``author``'s feedback on an answer.

    ``changes`` names fields of ``feedback_spec.FIELDS`` (``rating=1``, ``comment="..."``);
    ``None`` leaves a field as it is. Rating 0 withdraws the thumb. The newest earlier states
    (``FEEDBACK_HISTORY_MAX``) are kept in ``history``.
    """
    if message.role != Message.Role.ASSISTANT:
        raise FeedbackInvalid("feedback can only be given on assistant answers")
    check_changes(changes)
    # New evidence: whatever kept the judge from this answer may no longer hold. Cleared first,
    # so the message row lock orders this against a judge task recording a skip reason.
    Message.objects.filter(pk=message.pk).update(judging_skip_reason="")
    feedback, created = Feedback.objects.select_for_update().get_or_create(
        message=message, author=author
    )
    if not created:
        # Only the newest states are kept: a client toggling a thumb in a loop must not grow
        # one row without bound.
        keep = max(settings.FEEDBACK_HISTORY_MAX, 0)
        feedback.history = (
            [
                *feedback.history,
                {**feedback_state(feedback), "at": feedback.updated_at.isoformat()},
            ][-keep:]
            if keep
            else []
        )
    for name, value in changes.items():
        if value is not None:
            setattr(feedback, name, value.strip() if isinstance(value, str) else value)
    if tags is not None:
        feedback.tags = _clean_tags(tags, allowed_tags)
    feedback.save()
    enqueue(Task.JUDGE_MESSAGE, message.pk)
    return feedback


def _tags_for_rating(rating: int) -> list[str]:
    if rating > 0:
        return list(settings.FEEDBACK_TAGS_UP)
    if rating < 0:
        return list(settings.FEEDBACK_TAGS_DOWN)
    return []


@transaction.atomic
def feedback_rate(*, message: Message, author: Any, rating: int) -> Feedback:
    """Give, change or withdraw (0) the thumb; reason tags of the other thumb are dropped."""
    current = Feedback.objects.filter(message=message, author=author).first()
    allowed = _tags_for_rating(rating)
    tags = [tag for tag in (current.tags if current else []) if tag in allowed]
    return feedback_set(
        message=message, author=author, rating=rating, tags=tags, allowed_tags=allowed
    )


@transaction.atomic
def feedback_toggle_tag(*, message: Message, author: Any, tag: str) -> Feedback:
    """Add or remove one reason tag; a tag picks its thumb when none was given yet."""
    current = Feedback.objects.filter(message=message, author=author).first()
    rating = current.rating if current else 0
    if rating == 0:
        rating = 1 if tag in settings.FEEDBACK_TAGS_UP else -1
    tags = list(current.tags) if current else []
    tags = [t for t in tags if t != tag] if tag in tags else [*tags, tag]
    return feedback_set(
        message=message,
        author=author,
        rating=rating,
        tags=tags,
        allowed_tags=_tags_for_rating(rating),
    )
