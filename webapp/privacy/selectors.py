"""What a user's conversations left in the learning loop: samples not yet trained (they go with
a deleted conversation), samples an update is training on right now (deleting discards that
update), and samples already consumed by an update (what they taught stays in its weights)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet

from webapp.chat.models import Conversation
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate


@dataclass(frozen=True)
class TrainedVersion:
    label: str
    published: bool  # False: trained, but the candidate failed the probe gate and never served


@dataclass(frozen=True)
class TrainingFootprint:
    messages: int
    untrained_samples: int
    trained_samples: int
    versions: list[TrainedVersion] = field(default_factory=list)
    in_training: int = 0
    """Untrained samples that an update running now has in its batch: if the conversation is
    deleted, that update is discarded (``training_update_finish``), never served."""


def samples_in_running_updates() -> set[int]:
    """Ids of the samples held by updates running now (their batch, fixed when they started)."""
    held: set[int] = set()
    for summary in TrainingUpdate.objects.filter(status=TrainingUpdate.Status.RUNNING).values_list(
        "summary", flat=True
    ):
        held.update(summary.get("sample_ids", []))
    return held


def _versions_by_conversation(samples: QuerySet[Sample]) -> dict[int, list[TrainedVersion]]:
    rows = (
        samples.filter(status=Sample.Status.CONSUMED, update__produced_version__isnull=False)
        .values_list(
            "message__conversation_id",
            "update__produced_version__number",
            "update__produced_version__status",
        )
        .distinct()
        .order_by("message__conversation_id", "update__produced_version__number")
    )
    out: dict[int, list[TrainedVersion]] = defaultdict(list)
    for conversation_id, number, status in rows:
        out[conversation_id].append(
            TrainedVersion(label=f"v{number}", published=status != PolicyVersion.Status.REJECTED)
        )
    return out


def conversations_with_footprint(*, user: Any) -> list[tuple[Conversation, TrainingFootprint]]:
    """The user's conversations, newest activity first, each with its training footprint
    (three queries however many conversations)."""
    conversations = list(
        Conversation.objects.filter(owner=user).annotate(
            message_total=Count("messages", distinct=True),
            untrained=Count(
                "messages__samples",
                filter=~Q(messages__samples__status=Sample.Status.CONSUMED),
                distinct=True,
            ),
            trained=Count(
                "messages__samples",
                filter=Q(messages__samples__status=Sample.Status.CONSUMED),
                distinct=True,
            ),
        )
    )
    mine = Sample.objects.filter(message__conversation__owner=user)
    versions = _versions_by_conversation(mine)
    held = samples_in_running_updates()
    in_training: dict[int, int] = defaultdict(int)
    if held:
        for conversation_id in mine.filter(pk__in=held, status=Sample.Status.READY).values_list(
            "message__conversation_id", flat=True
        ):
            in_training[conversation_id] += 1
    return [
        (
            c,
            TrainingFootprint(
                messages=c.message_total,  # type: ignore[attr-defined]
                untrained_samples=c.untrained,  # type: ignore[attr-defined]
                trained_samples=c.trained,  # type: ignore[attr-defined]
                versions=versions.get(c.pk, []),
                in_training=in_training[c.pk],
            ),
        )
        for c in conversations
    ]


def conversation_footprint(*, conversation: Conversation) -> TrainingFootprint:
    samples = Sample.objects.filter(message__conversation=conversation)
    trained = samples.filter(status=Sample.Status.CONSUMED).count()
    held = samples_in_running_updates()
    return TrainingFootprint(
        messages=conversation.messages.count(),
        untrained_samples=samples.count() - trained,
        trained_samples=trained,
        versions=_versions_by_conversation(samples).get(conversation.pk, []),
        in_training=(
            samples.filter(pk__in=held, status=Sample.Status.READY).count() if held else 0
        ),
    )
