"""Live learning status in open chat pages: a small fragment pushed over the channel layer to
the conversation's group; the htmx ws extension swaps it into the answer's status slot."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.template.loader import render_to_string

from webapp.chat.groups import conversation_group, fragment_event
from webapp.learning.selectors import LearningStatus, learning_status

log = logging.getLogger(__name__)


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


def push_learning_status(*, messages: Iterable[tuple[int, int]]) -> None:
    """After commit, refresh the status badge of each (conversation id, message id)."""
    for conversation_id, message_id in messages:
        transaction.on_commit(lambda c=conversation_id, m=message_id: _push(c, m))
