"""A person's settings, one row each, made the first time they save them."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

TEMPERATURE_MIN, TEMPERATURE_MAX = 0, 2


class AccountSettings(models.Model):
    """How one person's new conversations and their chat answers start.

    The sampling fields are empty until the person chooses: empty follows the site's
    ``PARLEY_CHAT_TEMPERATURE`` / ``PARLEY_CHAT_MAX_TOKENS``, so a migration never fixes the
    values an operator set in the environment.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="account_settings"
    )
    train_consent_default = models.BooleanField(
        default=True, help_text="New conversations start with 'Use this conversation for training'."
    )
    temperature = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(TEMPERATURE_MIN), MaxValueValidator(TEMPERATURE_MAX)],
        help_text="Sampling temperature of browser chat answers; empty: the site's default.",
    )
    max_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Longest browser chat answer, in tokens; empty: the site's default.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "account settings"
        verbose_name_plural = "account settings"

    def __str__(self) -> str:
        return f"settings of {self.user}"
