"""Template helpers for the chat pages."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from webapp.chat.rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text or "")
