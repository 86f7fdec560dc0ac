"""The transcript as the chat page shows it: chat's entries, each answer with what the learning
loop made of it and the memories proposed from the feedback on it, looked up for all of them at
once."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import TranscriptEntry, transcript, transcript_entry
from webapp.learning.selectors import LearningStatus, learning_statuses
from webapp.memory.models import Memory
from webapp.memory.selectors import proposals_for_answers


@dataclass(frozen=True)
class PageEntry(TranscriptEntry):
    learning_status: LearningStatus | None = None  # None: not judged yet
    memory_proposals: tuple[Memory, ...] = ()  # waiting for the viewer's Keep or Dismiss


def _page_entries(entries: list[TranscriptEntry], viewer: Any) -> list[PageEntry]:
    answers = [e.message.pk for e in entries if e.message.is_assistant]
    statuses = learning_statuses(message_ids=answers) if answers else {}
    proposals = (
        proposals_for_answers(owner=viewer, message_ids=answers)
        if answers and viewer is not None
        else {}
    )
    return [
        PageEntry(
            **{f.name: getattr(e, f.name) for f in fields(e)},
            learning_status=statuses.get(e.message.pk),
            memory_proposals=tuple(proposals.get(e.message.pk, ())),
        )
        for e in entries
    ]


def page_transcript(*, conversation: Conversation, viewer: Any = None) -> list[PageEntry]:
    """``chat.selectors.transcript`` with each answer's learning status and the viewer's
    memories proposed under it."""
    return _page_entries(transcript(conversation=conversation, viewer=viewer), viewer)


def page_entry(*, message: Message, viewer: Any = None) -> PageEntry:
    """``chat.selectors.transcript_entry`` with the answer's learning status and proposals."""
    return _page_entries([transcript_entry(message=message, viewer=viewer)], viewer)[0]
