"""Forms behind the chat page's buttons (htmx posts them; they also work without JavaScript)."""

from __future__ import annotations

from typing import Any

from django import forms

from webapp.chat.feedback_spec import FIELDS, FeedbackField
from webapp.chat.limits import MAX_MESSAGE_CHARS


class ConversationStartForm(forms.Form):
    """The front page's first message, or no ``content`` at all (the sidebar's "New chat")."""

    content = forms.CharField(required=False, max_length=MAX_MESSAGE_CHARS, strip=False)

    def clean_content(self) -> str:
        content: str = self.cleaned_data["content"]
        # A message sent is never blank: whitespace alone is refused like an empty message.
        if "content" in self.data and not content.strip():
            raise forms.ValidationError("Type a message first.")
        return content


class RenameForm(forms.Form):
    title = forms.CharField(max_length=200, required=False)


class TrainConsentForm(forms.Form):
    train_consent = forms.BooleanField(required=False)


def _form_field(field: FeedbackField) -> forms.Field:
    if field.choices:
        return forms.TypedChoiceField(
            choices=[(str(c.value), c.label) for c in field.choices], coerce=int, required=False
        )
    return forms.CharField(required=False, max_length=field.max_length)


class FeedbackForm(forms.Form):
    """One change at a time: a thumb, a reason tag, or one field of ``feedback_spec.FIELDS``."""

    tag = forms.CharField(required=False, max_length=100)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in FIELDS:
            self.fields[field.name] = _form_field(field)
