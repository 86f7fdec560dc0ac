"""Editing a sent user message: the new text starts a new branch beside the old one.

Nothing is overwritten. The new text is a sibling of the edited message (same parent) and is
the one the transcript shows; the edited message and everything after it stay in the tree,
one sibling arrow away, as a regenerated answer keeps the answers before it.
"""

from __future__ import annotations

from django.db import transaction

from webapp.chat.models import Message
from webapp.chat.services import (
    derived_title,
    message_append,
    message_select,
    next_state_record,
)


@transaction.atomic
def user_message_edit(*, message: Message, content: str) -> Message:
    """Record ``content`` as the user's new version of ``message``, shown in its place.

    The answer the user saw after ``message`` takes the new version as its next state: the
    user rewrote the request because of that answer, as they would have corrected it or asked
    again in a reply, and the judge reads a repeated or corrected request as a miss. A first
    message's new text retitles the conversation, unless the user named it themselves.
    """
    if message.role != Message.Role.USER:
        raise ValueError("only the user's messages can be edited")
    conversation = message.conversation
    seen = message.children.filter(selected=True).order_by("created_at", "id").last()
    edited = message_append(
        conversation=conversation,
        role=Message.Role.USER,
        content=content,
        parent=message.parent,
    )
    # message_append leaves the other first messages selected: a fork at the root has no parent.
    message_select(message=edited)
    next_state_record(answered=seen, next_state=edited)
    if message.parent_id is None and not conversation.title_from_user:
        if title := derived_title(content):
            conversation.title = title
            conversation.save(update_fields=["title"])
    return edited
