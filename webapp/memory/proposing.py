"""Memories proposed from what a person already gives: a comment on an answer, a correction,
or a follow-up the judge took a hint from. What counts as a standing preference is
``webapp.memory.proposals.standing_preference``; the person keeps, edits or dismisses each
proposal under the answer (or through ``/v1/memories``)."""

from __future__ import annotations

from collections.abc import Sequence

from webapp.memory.models import Memory
from webapp.memory.proposals import standing_preference
from webapp.memory.services import memory_propose

FOLLOW_UP_PREFIX = "[user] "


def follow_up_words(next_state: str) -> str:
    """The person's own words in a next state (its ``[user]`` parts; tool results left out)."""
    return "\n".join(
        line[len(FOLLOW_UP_PREFIX) :]
        for line in next_state.splitlines()
        if line.startswith(FOLLOW_UP_PREFIX)
    )


def memories_propose(
    *, owner_id: int, message_id: int, texts: Sequence[tuple[str, str]]
) -> list[Memory]:
    """Propose what each ``(source, text)`` states as a standing preference (at most one per
    text; none already known)."""
    proposed = []
    for source, text in texts:
        memory_text = standing_preference(text) if text else None
        if not memory_text:
            continue
        memory = memory_propose(
            owner=owner_id,
            text=memory_text,
            source=source,
            source_message=message_id,
            source_text=text,
        )
        if memory is not None:
            proposed.append(memory)
    return proposed
