"""Template helpers for the chat pages."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from webapp.chat.rendering import render_markdown
from webapp.learning import selectors

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text or "")


@register.simple_tag
def learning_status(message_id: int) -> str:
    """The answer's learning status as stored now (live updates replace it over the websocket)."""
    return selectors.learning_status(message_id=message_id)
