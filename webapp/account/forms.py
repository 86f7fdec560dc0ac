"""The settings page's form: the training default and how answers are sampled."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from webapp.account.models import TEMPERATURE_MAX, TEMPERATURE_MIN
from webapp.account.selectors import AnswerSettings

ANSWER_LENGTHS = {128: "Short", 256: "Medium", 512: "Long", 1024: "Longest"}
"""Answer lengths offered, in tokens (a token is about three quarters of a word)."""


def answer_length_choices(current: int) -> list[tuple[int, str]]:
    """The lengths offered, with the site's default and the person's current length among them
    wherever those lie."""
    lengths = {**ANSWER_LENGTHS}
    lengths.setdefault(settings.CHAT_MAX_TOKENS, "Parley's default")
    lengths.setdefault(current, "Your length")
    return [(tokens, f"{lengths[tokens]} — up to {tokens} tokens") for tokens in sorted(lengths)]


class AccountSettingsForm(forms.Form):
    """Shown with what the person has now; saved as a whole."""

    train_consent_default = forms.BooleanField(
        required=False, label="Use my new conversations for training"
    )
    temperature = forms.FloatField(
        min_value=TEMPERATURE_MIN,
        max_value=TEMPERATURE_MAX,
        step_size=0.1,
        label="Temperature",
        error_messages={"step_size": "Use one decimal place, such as 0.7."},
    )
    max_tokens = forms.TypedChoiceField(coerce=int, label="Answer length")

    def __init__(
        self,
        data: Any = None,
        *,
        train_consent_default: bool,
        answers: AnswerSettings,
    ) -> None:
        initial = {
            "train_consent_default": train_consent_default,
            "temperature": answers.temperature,
            "max_tokens": answers.max_tokens,
        }
        super().__init__(data, initial=initial)
        self.fields["max_tokens"].choices = answer_length_choices(answers.max_tokens)
