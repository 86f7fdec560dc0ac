"""Deleting a conversation: a user's own request ("My data"), and the admin's delete, which
goes through the same service. Parley otherwise never wipes anything, but a person's request
to delete their conversation wins over that for their data."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.admin.models import DELETION
from django.db import transaction

from webapp.chat.models import Conversation, Feedback, Message
from webapp.chat.services import conversation_delete
from webapp.core.audit import audit_record
from webapp.learning.models import Judgement, Sample
from webapp.privacy.selectors import TrainingFootprint, conversation_footprint

DELETED_WITH_A_CONVERSATION = (Message, Feedback, Judgement, Sample)
"""What this service deletes with a conversation: their admins are view-only, so an admin
delete of a conversation (or of its owner) does not ask for their delete permission."""


def service_owned_perms(perms_needed: Iterable[str]) -> set[str]:
    """``perms_needed`` from the admin's delete check, less what this service deletes itself."""
    owned = {str(model._meta.verbose_name) for model in DELETED_WITH_A_CONVERSATION}
    return {str(p) for p in perms_needed} - owned


def footprint_note(footprint: TrainingFootprint) -> str:
    """What the deleted conversation had left in training, in a sentence or two for its owner."""
    running = (
        f" {footprint.in_training} sample(s) from it were being trained by an update running "
        "now: that update is discarded when it finishes and its weights are never served."
        if footprint.in_training
        else ""
    )
    if not footprint.trained_samples:
        return "Nothing from it had been trained." + running
    versions = ", ".join(
        v.label if v.published else f"{v.label} (never served)" for v in footprint.versions
    )
    return (
        f"{footprint.trained_samples} sample(s) from it had already been trained into "
        f"{versions or 'an update'}; what they taught stays in those weights.{running}"
    )


def deletion_summary(footprint: TrainingFootprint) -> str:
    return (
        f"{footprint.messages} message(s) and {footprint.untrained_samples} untrained "
        f"sample(s). {footprint_note(footprint)}"
    )


@transaction.atomic
def my_conversation_delete(
    *, conversation: Conversation, actor: Any = None, via: str = "My data"
) -> TrainingFootprint:
    """Delete the conversation with its messages, feedback, judgements and every sample made
    from it; returns what it had left behind, so the user can be told what was already trained.

    Samples an update consumed go too (their rows), but what they taught stays in the weights
    of the versions that update produced: those are not retrained. ``actor`` (the owner, or the
    admin deleting it) is recorded in the audit log with that footprint.
    """
    # Lock its samples first: an update finishing now consumes them under the same lock, so
    # either it finished first (and the footprint below says they were trained) or it finds
    # them gone and discards its weights (``training_update_finish``) — never "untrained" for
    # samples that end up served.
    list(
        Sample.objects.select_for_update(of=("self",))
        .filter(message__conversation=conversation)
        .values_list("pk", flat=True)
    )
    footprint = conversation_footprint(conversation=conversation)
    audit_record(
        actor=actor,
        objects=[conversation],
        flag=DELETION,
        message=f"Deleted via {via}: {deletion_summary(footprint)}",
    )
    conversation_delete(conversation=conversation)
    return footprint
