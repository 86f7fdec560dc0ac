"""A person's memories and every text and state each one had (nothing is wiped)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Memory(models.Model):
    """One standing fact or instruction of one person.

    ``proposed`` memories wait for the person's Keep or Dismiss; only ``active`` ones are served
    and distilled. ``deleted`` and ``dismissed`` rows stay, with their history, out of serving
    and training.
    """

    class State(models.TextChoices):
        PROPOSED = "proposed"
        ACTIVE = "active"
        PAUSED = "paused"
        DELETED = "deleted"
        DISMISSED = "dismissed"

    class Source(models.TextChoices):
        TYPED = "typed"
        COMMENT = "comment"
        CORRECTION = "correction"
        FOLLOW_UP = "follow-up"
        ALTERNATIVE = "alternative"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memories"
    )
    text = models.TextField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.TYPED)
    source_message = models.ForeignKey(
        "chat.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="proposed_memories",
        help_text="The answer whose comment, correction or follow-up proposed it.",
    )
    source_text = models.TextField(blank=True, help_text="What the person wrote that proposed it.")
    learnt_in = models.ForeignKey(
        "learning.PolicyVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="learnt_memories",
        help_text="The first published version that answers as if it were given.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["owner", "state"])]
        verbose_name_plural = "memories"

    def __str__(self) -> str:
        return f"{self.text[:60]} ({self.state})"


class MemoryRevision(models.Model):
    """One text and state a memory had, from the moment it had it."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="revisions")
    text = models.TextField()
    state = models.CharField(max_length=16, choices=Memory.State.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.memory_id}: {self.text[:40]} ({self.state})"
