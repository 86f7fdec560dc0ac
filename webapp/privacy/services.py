"""A user's own deletion request. Parley otherwise never wipes anything, but a person's
request to delete their conversation wins over that for their data."""

from __future__ import annotations

from django.db import transaction

from webapp.chat.models import Conversation
from webapp.chat.services import conversation_delete
from webapp.privacy.selectors import TrainingFootprint, conversation_footprint


@transaction.atomic
def my_conversation_delete(*, conversation: Conversation) -> TrainingFootprint:
    """Delete the conversation with its messages, feedback, judgements and every sample made
    from it; returns what it had left behind, so the user can be told what was already trained.

    Samples an update consumed go too (their rows), but what they taught stays in the weights
    of the versions that update produced: those are not retrained.
    """
    footprint = conversation_footprint(conversation=conversation)
    conversation_delete(conversation=conversation)
    return footprint
