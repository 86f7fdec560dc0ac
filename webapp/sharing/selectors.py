"""Reads of share links: the owner's (scoped, anyone else's answer 404) and the public page's
(by token, live only)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from webapp.sharing.models import ShareLink


def share_links_for_owner(*, owner: Any) -> QuerySet[ShareLink]:
    """The person's live links, newest first, each with its conversation (for its title)."""
    return ShareLink.objects.filter(
        conversation__owner=owner, revoked_at__isnull=True
    ).select_related("conversation")


def share_link_get_for_owner(*, owner: Any, pk: int) -> ShareLink:
    try:
        return ShareLink.objects.select_related("conversation").get(
            pk=pk, conversation__owner=owner
        )
    except ShareLink.DoesNotExist as exc:
        raise Http404("No such link") from exc


def share_link_live(*, token: str) -> ShareLink:
    """The live link with this token; an unknown or revoked one (or one whose conversation was
    deleted, which deleted the link) is a 404, the same answer for all three."""
    try:
        return ShareLink.objects.select_related("conversation").get(
            token=token, revoked_at__isnull=True
        )
    except ShareLink.DoesNotExist as exc:
        raise Http404("No such link") from exc
