"""Template helpers for the chat pages."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from webapp.chat.rendering import render_markdown

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return render_markdown(text or "")


# Line icons drawn on a 24-unit grid in the text's colour: no icon font, no emoji font needed.
ICONS = {
    "copy": '<rect x="9" y="9" width="11" height="11" rx="2"/><path d="M5 15V5a2 2 0 0 1 2-2h8"/>',
    "edit": '<path d="M4 20h4L19 9l-4-4L4 16z"/><path d="M14 6l4 4"/>',
    "regenerate": '<path d="M20 12a8 8 0 1 1-2.3-5.7"/><path d="M20 4v5h-5"/>',
    "thumb-up": (
        '<path d="M7 11v9H4v-9z"/>'
        '<path d="M7 11l4-7a2 2 0 0 1 3 2l-1 4h6a2 2 0 0 1 2 2.3l-1.2 6A2 2 0 0 1 17.8 20H7"/>'
    ),
    "thumb-down": (
        '<g transform="rotate(180 12 12)"><path d="M7 11v9H4v-9z"/>'
        '<path d="M7 11l4-7a2 2 0 0 1 3 2l-1 4h6a2 2 0 0 1 2 2.3l-1.2 6A2 2 0 0 1 17.8 20H7"/></g>'
    ),
    "comment": '<path d="M4 5h16v11H9l-5 4z"/>',
    "close": '<path d="M6 6l12 12M18 6L6 18"/>',
    "delete": '<path d="M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13"/>',
}


@register.simple_tag
def icon(name: str) -> SafeString:
    """An inline SVG icon; the button around it carries the label."""
    return mark_safe(  # fixed markup from ICONS above, nothing of the request in it
        '<svg class="ic" viewBox="0 0 24 24" aria-hidden="true" focusable="false" fill="none" '
        'stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">'
        f"{ICONS[name]}</svg>"
    )
