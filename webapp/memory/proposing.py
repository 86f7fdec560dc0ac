"""Memories proposed from what a person already gives: a comment on an answer, a correction,
a follow-up the judge took a hint from, or the same kind of alternative chosen twice. What
counts as a standing preference is ``webapp.memory.proposals.standing_preference`` (words) and
``webapp.memory.choice_cues`` (choices); the person keeps, edits or dismisses each proposal
under the answer (or through ``/v1/memories``)."""

from __future__ import annotations

from collections.abc import Sequence

from webapp.memory.choice_cues import MEMORY_TEXTS, standing_difference
from webapp.memory.models import Memory
from webapp.memory.proposals import standing_preference
from webapp.memory.services import memory_propose

FOLLOW_UP_PREFIX = "[user] "
CHOICE_WORDS = {"list": "listed", "shorter": "shorter", "longer": "longer"}


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


def memories_propose_from_choices(
    *, owner_id: int, message_id: int, differences: Sequence[str | None]
) -> Memory | None:
    """The memory a person's chosen alternatives point to (``choice_cues``): ``differences``
    are what set each chosen answer apart, the newest (``message_id``'s comparison) first."""
    standing = standing_difference(differences)
    if standing is None:
        return None
    seen = differences.count(standing)
    return memory_propose(
        owner=owner_id,
        text=MEMORY_TEXTS[standing],
        source=Memory.Source.ALTERNATIVE,
        source_message=message_id,
        source_text=f"You chose the {CHOICE_WORDS[standing]} answer in {seen} comparisons.",
    )
