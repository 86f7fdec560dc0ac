"""Reading memories: what a person's requests are given, and their own list (never another
person's: a memory of someone else is not found)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import Http404

from webapp.memory.models import Memory

LISTED = (Memory.State.ACTIVE, Memory.State.PAUSED, Memory.State.PROPOSED)


@dataclass(frozen=True)
class ServedMemory:
    """A memory as one request is given it (its id is recorded with the answer)."""

    id: int
    text: str

    def as_record(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text}


def memories_served(*, owner_id: int | None) -> tuple[ServedMemory, ...]:
    """The person's active memories in the order they were made; without the ones their live
    adapter has learnt when ``MEMORY_SERVE_LEARNT`` is off."""
    if owner_id is None:
        return ()
    rows = Memory.objects.filter(owner_id=owner_id, state=Memory.State.ACTIVE)
    if not settings.MEMORY_SERVE_LEARNT:
        rows = rows.filter(learnt_in__isnull=True)
    return tuple(
        ServedMemory(pk, text)
        for pk, text in rows.order_by("created_at", "id").values_list("pk", "text")
    )


def memory_list(*, owner: Any, states: tuple[str, ...] = LISTED) -> list[Memory]:
    return list(
        Memory.objects.filter(owner=owner, state__in=states)
        .select_related("learnt_in")
        .order_by("created_at", "id")
    )


def memory_get_for_owner(*, owner: Any, pk: Any) -> Memory:
    """The person's memory ``pk`` (any state), or a 404 (also for someone else's)."""
    try:
        return Memory.objects.select_related("learnt_in").get(pk=int(pk), owner=owner)
    except (Memory.DoesNotExist, TypeError, ValueError) as exc:
        raise Http404("No such memory.") from exc


def proposals_for_answers(*, owner: Any, message_ids: list[int]) -> dict[int, list[Memory]]:
    """The proposals still waiting under these answers, by answer."""
    out: dict[int, list[Memory]] = {}
    rows = Memory.objects.filter(
        owner=owner, state=Memory.State.PROPOSED, source_message_id__in=message_ids
    ).order_by("created_at", "id")
    for memory in rows:
        out.setdefault(memory.source_message_id, []).append(memory)
    return out
