"""A read-only link to one conversation that its owner can hand to anyone and revoke.

The token is the link's only secret: whoever holds ``/s/<token>/`` reads that one conversation
and nothing else of its owner. It is kept as it is (not hashed, unlike an API key's secret)
because the owner copies the link again later, from the conversation's menu or from Settings.
Writes go through ``webapp.sharing.services``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.urls import reverse

from webapp.chat.models import Conversation


class ShareLink(models.Model):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="share_links"
    )
    token = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # The menu shows "the" link of a conversation: at most one is live at a time.
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(revoked_at__isnull=True),
                name="one_live_share_link_per_conversation",
            )
        ]

    def __str__(self) -> str:
        return f"Share link to {self.conversation}"

    @property
    def is_live(self) -> bool:
        return self.revoked_at is None

    def get_absolute_url(self) -> str:
        return reverse("shared:conversation", args=[self.token])
