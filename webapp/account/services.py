"""The only writer of ``AccountSettings``: a person saving their settings page."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.account.models import AccountSettings


@transaction.atomic
def account_settings_update(
    *, user: Any, train_consent_default: bool, temperature: float, max_tokens: int
) -> AccountSettings:
    """Store the person's choices, making their row the first time.

    Raises ``ValidationError`` for a value out of range (a temperature above 2, say), with
    nothing stored: the form says so first, this keeps any other caller honest.
    """
    row, _ = AccountSettings.objects.select_for_update().get_or_create(user=user)
    row.train_consent_default = train_consent_default
    row.temperature = round(temperature, 2)
    row.max_tokens = max_tokens
    row.full_clean()
    row.save(update_fields=["train_consent_default", "temperature", "max_tokens", "updated_at"])
    return row
