"""Reads of a person's settings, each one query, with the site's defaults where they chose
nothing. The chat reads them when it opens a conversation or asks for an answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from webapp.account.models import AccountSettings


@dataclass(frozen=True)
class AnswerSettings:
    """How a person's browser chat answers are sampled."""

    temperature: float
    max_tokens: int

    def as_params(self) -> dict[str, float | int]:
        """The request's sampling parameters, as the serving engine takes them."""
        return {"max_tokens": self.max_tokens, "temperature": self.temperature}


def account_settings_for(*, user: Any) -> AccountSettings:
    """The person's settings; an unsaved row with the defaults until they save some."""
    found = AccountSettings.objects.filter(user_id=user.pk).first()
    return found if found is not None else AccountSettings(user_id=user.pk)


def answer_settings_of(*, temperature: float | None, max_tokens: int | None) -> AnswerSettings:
    """The person's stored choices, the site's defaults where they chose nothing."""
    return AnswerSettings(
        temperature=settings.CHAT_TEMPERATURE if temperature is None else temperature,
        max_tokens=settings.CHAT_MAX_TOKENS if max_tokens is None else max_tokens,
    )


def answer_settings_for(*, user: Any) -> AnswerSettings:
    row = (
        AccountSettings.objects.filter(user_id=user.pk)
        .values_list("temperature", "max_tokens")
        .first()
    )
    temperature, max_tokens = row if row is not None else (None, None)
    return answer_settings_of(temperature=temperature, max_tokens=max_tokens)


def train_consent_default_for(*, user: Any) -> bool:
    """Whether the person's new conversations are used for training (yes, unless they said no)."""
    if user is None:
        return True
    return not AccountSettings.objects.filter(user_id=user.pk, train_consent_default=False).exists()
