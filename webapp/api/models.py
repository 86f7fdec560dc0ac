"""API keys: stored as a SHA-256 of the secret (keys are 256-bit random, so no slow hash is
needed), shown once at creation, listed by their prefix only."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiKey(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True)
    secret_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    serves_memory = models.BooleanField(
        default=True,
        help_text="Give the owner's memories to this key's requests (off for agents that bring "
        "their own memory).",
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
