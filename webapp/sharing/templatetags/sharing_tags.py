"""Template helpers for share links."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.sharing.models import ShareLink

register = template.Library()


@register.simple_tag(takes_context=True)
def share_url(context: dict[str, Any], link: ShareLink) -> str:
    """The link's full address, on the host the page was asked for (what a reader opens)."""
    request = context.get("request")
    path = link.get_absolute_url()
    return request.build_absolute_uri(path) if request is not None else path
