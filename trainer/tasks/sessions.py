"""Periodic session upkeep (run by celery beat)."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="trainer.tasks.sessions.close_idle_sessions")
def close_idle_sessions() -> int:
    """Close conversations idle longer than PARLEY_SESSION_IDLE_MINUTES."""
    from django.conf import settings

    from webapp.chat.services import conversations_close_idle

    return conversations_close_idle(idle_minutes=settings.SESSION_IDLE_MINUTES)
