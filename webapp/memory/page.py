"""What the memory page, My model and the chat show of a person's memories, in plain words:
where each one stands, where it came from, what it was before, and how much room they take.

Reads only (the selectors' rows, with their history and source answers loaded in a fixed
number of queries); the writer is ``webapp.memory.services``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import prefetch_related_objects

from trainer.memory_prompt import served_tokens
from webapp.memory.models import Memory, MemoryRevision
from webapp.memory.selectors import memory_list
from webapp.memory.services import KEPT

SOURCE_WORDS = {
    Memory.Source.TYPED: "you typed it",
    Memory.Source.COMMENT: "from your comment on",
    Memory.Source.CORRECTION: "from your correction on",
    Memory.Source.FOLLOW_UP: "from what you said next in",
    Memory.Source.ALTERNATIVE: "from the answer you chose in",
}
REVISION_WORDS = {
    Memory.State.PROPOSED: "proposed",
    Memory.State.ACTIVE: "in your answers",
    Memory.State.PAUSED: "paused",
    Memory.State.DELETED: "deleted",
    Memory.State.DISMISSED: "dismissed",
}


@dataclass(frozen=True)
class PastText:
    """A text and state a memory had before it was changed."""

    text: str
    state_words: str
    at: datetime


@dataclass(frozen=True)
class MemoryRow:
    """One memory as the page lists it; ``history``: what it was before, newest first."""

    memory: Memory
    history: list[PastText] = field(default_factory=list)

    @property
    def served(self) -> bool:
        """Whether the person's messages are given it now (``memories_served``)."""
        memory = self.memory
        return memory.state == Memory.State.ACTIVE and (
            settings.MEMORY_SERVE_LEARNT or memory.learnt_in_id is None
        )

    @property
    def state_words(self) -> str:
        """ "in your answers now", "paused", "waiting for you": the learnt version is said
        beside it (``learnt_version``)."""
        if self.served:
            return "in your answers now"
        return {
            Memory.State.ACTIVE: "",  # learnt, and no longer given with each message
            Memory.State.PAUSED: "paused",
            Memory.State.PROPOSED: "waiting for you",
        }.get(self.memory.state, self.memory.state)

    @property
    def learnt_version(self) -> int | None:
        """The number of the first version of the person's model that answers as if it were
        given, if one does."""
        version = self.memory.learnt_in
        return version.number if version is not None else None

    @property
    def source_words(self) -> str:
        return SOURCE_WORDS.get(self.memory.source, "")

    @property
    def source_message(self) -> Any:
        """The answer it was proposed under, when that answer is still there (and the
        person's own)."""
        message = self.memory.source_message
        if message is None or message.conversation.owner_id != self.memory.owner_id:
            return None
        return message


def _past(revision: MemoryRevision) -> PastText:
    return PastText(
        text=revision.text,
        state_words=REVISION_WORDS.get(revision.state, revision.state),
        at=revision.created_at,
    )


def memory_rows(*, owner: Any, states: tuple[str, ...] = KEPT) -> list[MemoryRow]:
    """The person's memories in ``states``, oldest first, each with its history and source
    answer (three queries however many)."""
    memories = memory_list(owner=owner, states=states)
    prefetch_related_objects(memories, "revisions", "source_message__conversation")
    rows = []
    for memory in memories:
        revisions = sorted(memory.revisions.all(), key=lambda r: (r.created_at, r.pk))
        # The newest revision is the memory as it is; the ones before it are its history.
        rows.append(MemoryRow(memory=memory, history=[_past(r) for r in reversed(revisions[:-1])]))
    return rows


@dataclass(frozen=True)
class MemoryRoom:
    """How many memories the person keeps of the most allowed, and the share of the room in
    each message their active ones take."""

    kept: int
    most: int
    served_percent: int
    max_chars: int

    @property
    def full(self) -> bool:
        return self.kept >= self.most


def memory_room(rows: list[MemoryRow]) -> MemoryRoom:
    """The counts the page shows for ``rows`` (all the person's kept memories)."""
    served = [row.memory.text for row in rows if row.memory.state == Memory.State.ACTIVE]
    used = served_tokens(served, settings.MEMORY_FORM)
    budget = max(1, settings.MEMORY_SERVED_TOKENS)
    return MemoryRoom(
        kept=sum(1 for row in rows if row.memory.state in KEPT),
        most=settings.MEMORY_MAX_KEPT,
        served_percent=min(100, round(100 * used / budget)),
        max_chars=settings.MEMORY_MAX_CHARS,
    )
