"""Answers still marked as being written whose writing died with its process (a restart, a
crash): the one write that ends them, beside ``services.assistant_message_finish``, which ends
every answer whose writer lived to store it."""

from __future__ import annotations

from collections.abc import Iterable

from django.utils import timezone

from webapp.chat.models import Message


def assistant_messages_abandon(*, message_ids: Iterable[int]) -> int:
    """Store these answers as stopped, if they are still marked as being written (a writer that
    stored its answer meanwhile wins). An answer's text is stored when it ends, so none of it
    is kept. Returns how many were stopped."""
    return Message.objects.filter(pk__in=list(message_ids), status=Message.Status.STREAMING).update(
        status=Message.Status.STOPPED, completed_at=timezone.now()
    )
