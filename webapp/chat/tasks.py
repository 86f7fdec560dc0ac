"""Celery entry points for conversations (found by autodiscovery; queue ``judge``).

Closing a conversation queues ``finalize_conversation``, the learning loop's work: it lives in
webapp/learning/tasks.py under the name ``webapp.core.outbox.Task`` gives it.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from webapp.chat import titles
from webapp.chat.services import conversations_close_idle
from webapp.core.outbox import Task


@shared_task(name=Task.CLOSE_IDLE_CONVERSATIONS.value)
def close_idle_conversations() -> int:
    """Close conversations idle longer than PARLEY_SESSION_IDLE_MINUTES (run by beat)."""
    return conversations_close_idle(idle_minutes=settings.SESSION_IDLE_MINUTES)


@shared_task(name=Task.SUGGEST_CONVERSATION_TITLE.value)
def suggest_conversation_title(conversation_id: int) -> str | None:
    """The model's title for a conversation after its first answer (no retry: a model that is
    down leaves the first-message title)."""
    return titles.conversation_title_suggest(conversation_id, complete=titles.ask_model)
