"""Forms behind the chat page's buttons (htmx posts them; they also work without JavaScript)."""

from __future__ import annotations

from django import forms

from webapp.chat.services import MAX_FEEDBACK_TEXT


class ConversationStartForm(forms.Form):
    content = forms.CharField(required=False, max_length=50_000, strip=False)


class RenameForm(forms.Form):
    title = forms.CharField(max_length=200, required=False)


class TrainConsentForm(forms.Form):
    train_consent = forms.BooleanField(required=False)


class FeedbackForm(forms.Form):
    """One change at a time: a thumb, a reason tag, the comment or the correction."""

    rating = forms.TypedChoiceField(
        choices=[("1", "👍"), ("-1", "👎"), ("0", "none")], coerce=int, required=False
    )
    tag = forms.CharField(required=False, max_length=100)
    comment = forms.CharField(required=False, max_length=MAX_FEEDBACK_TEXT)
    correction = forms.CharField(required=False, max_length=MAX_FEEDBACK_TEXT)
