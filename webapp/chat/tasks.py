"""Celery entry points for conversations (found by autodiscovery; queue ``judge``)."""

from __future__ import annotations

from celery import Task as CeleryTask
from celery import shared_task
from django.conf import settings

from webapp.chat.models import Conversation
from webapp.chat.services import conversations_close_idle
from webapp.core.limits import judging_slot
from webapp.core.outbox import Task
from webapp.learning.tasks import JUDGE_RETRY, JudgeBusy
from webapp.learning.workflows import judging


@shared_task(name=Task.FINALIZE_CONVERSATION.value, **JUDGE_RETRY)
def finalize_conversation(self: CeleryTask, conversation_id: int) -> int | None:
    """A conversation closed: make sure it leaves at least one sample (within its owner's
    judge budget, as ``judge_message``)."""
    owner_id = (
        Conversation.objects.filter(pk=conversation_id).values_list("owner_id", flat=True).first()
    )
    with judging_slot(user_id=owner_id, work=f"conversation:{conversation_id}") as admitted:
        if not admitted:
            raise JudgeBusy(f"the owner of conversation {conversation_id} is at their limit")
        return judging.finalize_conversation(conversation_id, judge=judging.judge_from_settings())


@shared_task(name=Task.CLOSE_IDLE_CONVERSATIONS.value)
def close_idle_conversations() -> int:
    """Close conversations idle longer than PARLEY_SESSION_IDLE_MINUTES (run by beat)."""
    return conversations_close_idle(idle_minutes=settings.SESSION_IDLE_MINUTES)
