"""Reads of conversations and messages, always scoped to their owner (others get a 404)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet
from django.http import Http404

from webapp.chat.models import Conversation, Feedback, Message


def conversation_list_for_user(*, user: Any) -> QuerySet[Conversation]:
    """The person's conversations, less any that holds an agent's side turns (its housekeeping)
    and no main-line message: that one is no conversation they had. Searching them is
    ``webapp.chat.search``."""
    messages = Message.objects.filter(conversation=OuterRef("pk"))
    return Conversation.objects.filter(owner=user).exclude(
        Exists(messages.filter(turn_type=Message.TurnType.SIDE))
        & ~Exists(messages.filter(turn_type=Message.TurnType.MAIN))
    )


def conversation_get_for_user(*, user: Any, pk: int) -> Conversation:
    try:
        return Conversation.objects.get(pk=pk, owner=user)
    except Conversation.DoesNotExist as exc:
        raise Http404("No such conversation") from exc


def message_get_for_user(*, user: Any, pk: int) -> Message:
    try:
        return Message.objects.select_related("conversation", "policy_version").get(
            pk=pk, conversation__owner=user
        )
    except Message.DoesNotExist as exc:
        raise Http404("No such message") from exc


def answer_get_by_completion(*, owner: Any, completion_id: str) -> Message | None:
    """The answer a /v1 completion id names, if ``owner``'s (an API client rates by that id)."""
    return (
        Message.objects.filter(completion_id=completion_id, conversation__owner=owner)
        .select_related("conversation")
        .first()
    )


@dataclass(frozen=True)
class TranscriptEntry:
    message: Message
    sibling_index: int  # 1-based position among the answers to the same prompt
    sibling_count: int
    previous_sibling: int | None
    next_sibling: int | None
    feedback: Feedback | None


def transcript(*, conversation: Conversation, viewer: Any = None) -> list[TranscriptEntry]:
    """The selected path through the conversation tree, with sibling navigation and feedback."""
    messages = list(
        conversation.messages.exclude(turn_type=Message.TurnType.UNSEEN)
        .select_related("policy_version")
        .order_by("created_at", "id")
    )
    children: dict[int | None, list[Message]] = {}
    for message in messages:
        children.setdefault(message.parent_id, []).append(message)
    feedback: dict[int, Feedback] = {}
    if viewer is not None:
        feedback = {
            item.message_id: item
            for item in Feedback.objects.filter(message__conversation=conversation, author=viewer)
        }
    entries: list[TranscriptEntry] = []
    parent_id: int | None = None
    while parent_id in children:
        siblings = children[parent_id]
        # The selected child; where none is, the newest that is no side turn: side turns (an
        # agent's housekeeping) are kept beside the main line, never on it.
        chosen = next((m for m in reversed(siblings) if m.selected), None) or next(
            (m for m in reversed(siblings) if m.turn_type != Message.TurnType.SIDE), None
        )
        if chosen is None:
            break
        position = siblings.index(chosen)
        entries.append(
            TranscriptEntry(
                message=chosen,
                sibling_index=position + 1,
                sibling_count=len(siblings),
                previous_sibling=siblings[position - 1].pk if position > 0 else None,
                next_sibling=siblings[position + 1].pk if position + 1 < len(siblings) else None,
                feedback=feedback.get(chosen.pk),
            )
        )
        parent_id = chosen.pk
    return entries


def prompt_path(*, message: Message) -> list[Message]:
    """The messages from the start of the conversation up to and including ``message``."""
    path: list[Message] = []
    by_id = {m.pk: m for m in message.conversation.messages.all()}
    current: Message | None = by_id.get(message.pk, message)
    while current is not None:
        path.append(current)
        current = by_id.get(current.parent_id) if current.parent_id else None
    return list(reversed(path))


def prompt_messages(*, message: Message) -> list[dict[str, object]]:
    """What the model sees when answering ``message``: the path up to it, as OpenAI messages.

    Failed answers are left out (the model never gave them); stopped ones stay, since the
    user saw them.
    """
    return [
        item.as_openai()
        for item in prompt_path(message=message)
        if not (item.is_assistant and item.status == Message.Status.FAILED)
    ]


def transcript_entry(*, message: Message, viewer: Any = None) -> TranscriptEntry:
    """One message as the transcript shows it: its place among its siblings and its feedback."""
    siblings = list(
        Message.objects.filter(conversation=message.conversation_id, parent=message.parent_id)
        .exclude(turn_type=Message.TurnType.UNSEEN)
        .order_by("created_at", "id")
    )
    ids = [sibling.pk for sibling in siblings]
    position = ids.index(message.pk)
    feedback = Feedback.objects.filter(message=message, author=viewer).first() if viewer else None
    return TranscriptEntry(
        message=message,
        sibling_index=position + 1,
        sibling_count=len(ids),
        previous_sibling=ids[position - 1] if position > 0 else None,
        next_sibling=ids[position + 1] if position + 1 < len(ids) else None,
        feedback=feedback,
    )
