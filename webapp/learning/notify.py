"""Live learning status in open chat pages: small fragments pushed over the channel layer to
the conversation's group; the htmx ws extension swaps each into its slot by id.

Two fragments: the status under the answer that changed, and the owner's learning progress
(``webapp.learning.progress``: what Parley has from them, the update training now, the version
live). A person's progress goes to the pages of their ``RECENT_PAGES`` most recently active
conversations (a group nobody has open costs nothing); the fragment itself asks again for
fresh figures now and then, so a page of an older conversation catches up on its own."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.template.loader import render_to_string

from webapp.chat.groups import conversation_group, fragment_event
from webapp.chat.models import Conversation
from webapp.learning.progress import learning_progress
from webapp.learning.selectors import LearningStatus, learning_status

log = logging.getLogger(__name__)

RECENT_PAGES = 20


def _fragment(message_id: int, status: LearningStatus | None) -> str:
    return render_to_string(
        "chat/_learning_status.html",
        {"message_id": message_id, "status": status, "rated": True, "oob": True},
    )


def _push(conversation_id: int, message_id: int) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            conversation_group(conversation_id),
            fragment_event(_fragment(message_id, learning_status(message_id=message_id))),
        )
    except Exception:  # a status badge must never fail judging or training
        log.warning("could not push learning status of message %s", message_id, exc_info=True)


def progress_fragment(*, user_id: int) -> str:
    """The owner's learning progress as the chat page shows it, to swap in by its id."""
    return render_to_string(
        "mymodel/_progress.html",
        {"progress": learning_progress(user_id=user_id), "place": "chat", "oob": True},
    )


def _push_progress(conversation_ids: list[int]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        owners = set(
            Conversation.objects.filter(pk__in=conversation_ids).values_list("owner_id", flat=True)
        )
        for owner_id in sorted(owners):
            event = fragment_event(progress_fragment(user_id=owner_id))
            recent = Conversation.objects.filter(owner_id=owner_id).order_by("-last_activity_at")
            for conversation_id in recent.values_list("pk", flat=True)[:RECENT_PAGES]:
                async_to_sync(layer.group_send)(conversation_group(conversation_id), event)
    except Exception:  # a progress line must never fail judging or training
        log.warning("could not push learning progress", exc_info=True)


def push_learning_status(*, messages: Iterable[tuple[int, int]]) -> None:
    """After commit, refresh the status badge of each (conversation id, message id), and the
    learning progress of each conversation's owner."""
    pairs = list(messages)
    for conversation_id, message_id in pairs:
        transaction.on_commit(lambda c=conversation_id, m=message_id: _push(c, m))
    conversations = sorted({conversation_id for conversation_id, _ in pairs})
    if conversations:
        transaction.on_commit(lambda: _push_progress(conversations))
