"""The only writers of ``ShareLink``: make a conversation's link, and revoke one.

Both take objects the caller already looked up for their owner (the views use the chat and
sharing selectors, which answer anyone else with a 404)."""

from __future__ import annotations

import secrets

from django.db import transaction
from django.utils import timezone

from webapp.chat.models import Conversation
from webapp.sharing.models import ShareLink

TOKEN_BYTES = 32  # 43 URL-safe characters: not guessable, not enumerable


@transaction.atomic
def share_link_create(*, conversation: Conversation) -> ShareLink:
    """The conversation's live link: the one it has, or a new one with a fresh random token."""
    # Two clicks on "Share…" at once must not make two live links: the conversation's row
    # lock lets the second see the first's link.
    Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
    live = ShareLink.objects.filter(conversation=conversation, revoked_at__isnull=True).first()
    if live is not None:
        return live
    return ShareLink.objects.create(
        conversation=conversation, token=secrets.token_urlsafe(TOKEN_BYTES)
    )


@transaction.atomic
def share_link_revoke(*, link: ShareLink) -> ShareLink:
    """Revoke the link: from now on its page is a 404. Revoking twice changes nothing."""
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
    return link
