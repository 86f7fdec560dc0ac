"""The only writer of memories and their revisions: add, propose, keep, edit, pause, resume,
delete, dismiss and mark learnt. Each change records a ``MemoryRevision``, so an edit keeps the
old text and a deletion keeps the row (out of serving and training from that moment).

Limits (settings): at most ``MEMORY_MAX_KEPT`` memories active, paused or proposed, each at most
``MEMORY_MAX_CHARS`` characters, and the active ones together within ``MEMORY_SERVED_TOKENS``
(estimated) of every request. A change past a limit raises ``MemoryRefused`` with the sentence
the person is shown.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from trainer.memory_prompt import served_tokens
from webapp.memory.models import Memory, MemoryRevision
from webapp.memory.signals import memories_changed

KEPT = (Memory.State.ACTIVE, Memory.State.PAUSED, Memory.State.PROPOSED)


class MemoryRefused(ValueError):
    """A change the limits or the memory's state do not allow; the message says why."""


def _clean(text: str) -> str:
    cleaned = " ".join(str(text or "").split())
    if not cleaned:
        raise MemoryRefused("A memory needs some text.")
    limit = settings.MEMORY_MAX_CHARS
    if len(cleaned) > limit:
        raise MemoryRefused(
            f"A memory is at most {limit} characters; this one has {len(cleaned)}. "
            "Split it in two or say it shorter."
        )
    return cleaned


def _check_room(owner: Any, *, adding: bool) -> None:
    limit = settings.MEMORY_MAX_KEPT
    if adding and Memory.objects.filter(owner=owner, state__in=KEPT).count() >= limit:
        raise MemoryRefused(
            f"You have {limit} memories, the most Parley keeps; delete one you no longer need."
        )


def _check_budget(owner: Any, texts: list[str]) -> None:
    budget = settings.MEMORY_SERVED_TOKENS
    used = served_tokens(texts, settings.MEMORY_FORM)
    if used > budget:
        raise MemoryRefused(
            f"Your active memories would take about {used} tokens of every request, more than "
            f"the {budget} they may use; pause or shorten one first."
        )


def _active_texts(owner: Any, *, without: int | None = None) -> list[str]:
    rows = Memory.objects.filter(owner=owner, state=Memory.State.ACTIVE).exclude(pk=without)
    return list(rows.order_by("created_at", "id").values_list("text", flat=True))


def _record(memory: Memory) -> Memory:
    memory.save()
    MemoryRevision.objects.create(memory=memory, text=memory.text, state=memory.state)
    transaction.on_commit(lambda: memories_changed(owner_id=memory.owner_id))
    return memory


@transaction.atomic
def memory_add(*, owner: Any, text: str) -> Memory:
    """A memory the person typed: active at once."""
    cleaned = _clean(text)
    _lock_owner(owner)
    _check_room(owner, adding=True)
    _check_budget(owner, [*_active_texts(owner), cleaned])
    return _record(Memory(owner_id=_owner_id(owner), text=cleaned, state=Memory.State.ACTIVE))


@transaction.atomic
def memory_propose(
    *, owner: Any, text: str, source: str, source_message: Any = None, source_text: str = ""
) -> Memory | None:
    """A memory proposed from what the person wrote; None when it is already there (kept,
    proposed or dismissed with the same text) or there is no room for it."""
    try:
        cleaned = _clean(text)
    except MemoryRefused:
        return None
    _lock_owner(owner)
    same = Memory.objects.filter(owner=owner, text__iexact=cleaned).exclude(
        state=Memory.State.DELETED
    )
    if same.exists():
        return None
    try:
        _check_room(owner, adding=True)
    except MemoryRefused:
        return None
    return _record(
        Memory(
            owner_id=_owner_id(owner),
            text=cleaned,
            state=Memory.State.PROPOSED,
            source=source,
            source_message_id=getattr(source_message, "pk", source_message),
            source_text=source_text[:2000],
        )
    )


@transaction.atomic
def memory_edit(*, memory: Memory, text: str) -> Memory:
    """A new text (the old one stays in the history). An edited memory is learnt again."""
    memory = _locked(memory)
    if memory.state in (Memory.State.DELETED, Memory.State.DISMISSED):
        raise MemoryRefused("This memory was deleted; add it again instead.")
    cleaned = _clean(text)
    if cleaned == memory.text:
        return memory
    if memory.state == Memory.State.ACTIVE:
        _check_budget(
            memory.owner_id, [*_active_texts(memory.owner_id, without=memory.pk), cleaned]
        )
    memory.text = cleaned
    memory.learnt_in = None
    return _record(memory)


def _set_state(memory: Memory, state: str, *, allowed: tuple[str, ...], verb: str) -> Memory:
    memory = _locked(memory)
    if memory.state == state:
        return memory
    if memory.state not in allowed:
        raise MemoryRefused(f"A memory that is {memory.state} cannot be {verb}.")
    if state == Memory.State.ACTIVE:
        texts = [*_active_texts(memory.owner_id, without=memory.pk), memory.text]
        _check_budget(memory.owner_id, texts)
    memory.state = state
    return _record(memory)


@transaction.atomic
def memory_keep(*, memory: Memory, text: str | None = None) -> Memory:
    """Keep a proposed memory (with the person's own wording, if they edited it): active."""
    memory = _locked(memory)
    if memory.state != Memory.State.PROPOSED:
        raise MemoryRefused(f"A memory that is {memory.state} cannot be kept.")
    if text is not None and text.strip():
        memory.text = _clean(text)
    _check_budget(memory.owner_id, [*_active_texts(memory.owner_id), memory.text])
    memory.state = Memory.State.ACTIVE
    return _record(memory)


@transaction.atomic
def memory_dismiss(*, memory: Memory) -> Memory:
    return _set_state(
        memory, Memory.State.DISMISSED, allowed=(Memory.State.PROPOSED,), verb="dismissed"
    )


@transaction.atomic
def memory_pause(*, memory: Memory) -> Memory:
    return _set_state(memory, Memory.State.PAUSED, allowed=(Memory.State.ACTIVE,), verb="paused")


@transaction.atomic
def memory_resume(*, memory: Memory) -> Memory:
    return _set_state(memory, Memory.State.ACTIVE, allowed=(Memory.State.PAUSED,), verb="resumed")


@transaction.atomic
def memory_delete(*, memory: Memory) -> Memory:
    """Out of serving and future training at once; the row and its history stay."""
    return _set_state(memory, Memory.State.DELETED, allowed=KEPT, verb="deleted")


def memories_mark_learnt(*, memory_ids: list[int], version: Any) -> int:
    """Record that ``version`` answers as if these memories were given (the first one that
    does); the count marked."""
    with transaction.atomic():
        rows = list(
            Memory.objects.select_for_update()
            .filter(pk__in=memory_ids, learnt_in__isnull=True)
            .exclude(state__in=(Memory.State.DELETED, Memory.State.DISMISSED))
        )
        for memory in rows:
            memory.learnt_in = version
            memory.save(update_fields=["learnt_in", "updated_at"])
        if rows:
            owner_id = rows[0].owner_id
            transaction.on_commit(lambda: memories_changed(owner_id=owner_id))
    return len(rows)


def _locked(memory: Memory) -> Memory:
    return Memory.objects.select_for_update().get(pk=memory.pk)


def _owner_id(owner: Any) -> int:
    """A person or their id (the API passes a key's ``owner_id``)."""
    return int(getattr(owner, "pk", owner))


def _lock_owner(owner: Any) -> None:
    """Serialise one person's changes, so two adds cannot both pass the count and budget."""
    get_user_model().objects.select_for_update().filter(pk=_owner_id(owner)).first()
