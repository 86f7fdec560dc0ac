"""``/v1/memories``: a key owner's memories through the API (list, add, read, edit, pause,
resume, keep or dismiss a proposal, delete), as the memory page offers them in the browser.

Each function takes the authenticated key and returns the JSON body; ``MemoryRefused`` becomes
a 400 naming the field, someone else's memory a 404, as OpenAI answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import Http404

from webapp.api.errors import ApiError
from webapp.api.models import ApiKey
from webapp.api.schemas import bad
from webapp.memory import services
from webapp.memory.models import Memory
from webapp.memory.selectors import LISTED, memory_get_for_owner, memory_list

STATE_FILTERS = {
    "listed": LISTED,
    "all": tuple(Memory.State.values),
    **{state: (state,) for state in Memory.State.values},
}
# The states a client may ask for with PATCH, and the service that moves a memory there.
_MOVES: dict[str, Callable[..., Memory]] = {
    Memory.State.ACTIVE: lambda memory: (
        services.memory_keep(memory=memory)
        if memory.state == Memory.State.PROPOSED
        else services.memory_resume(memory=memory)
    ),
    Memory.State.PAUSED: lambda memory: services.memory_pause(memory=memory),
    Memory.State.DISMISSED: lambda memory: services.memory_dismiss(memory=memory),
    Memory.State.DELETED: lambda memory: services.memory_delete(memory=memory),
}


def memory_json(memory: Memory, *, history: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": memory.pk,
        "object": "memory",
        "text": memory.text,
        "state": memory.state,
        "source": memory.source,
        "source_message": memory.source_message_id,
        "source_text": memory.source_text,
        "learnt_in_version": memory.learnt_in.number if memory.learnt_in_id else None,
        "created_at": int(memory.created_at.timestamp()),
        "updated_at": int(memory.updated_at.timestamp()),
    }
    if history:
        body["history"] = [
            {"text": r.text, "state": r.state, "at": int(r.created_at.timestamp())}
            for r in memory.revisions.order_by("created_at", "id")
        ]
    return body


def _refused(exc: services.MemoryRefused, param: str) -> ApiError:
    return ApiError(400, str(exc), param=param, code="memory_refused")


def _owned(key: ApiKey, memory_id: str) -> Memory:
    try:
        return memory_get_for_owner(owner=key.owner_id, pk=memory_id)
    except Http404 as exc:
        raise ApiError(
            404, f"No memory {memory_id} among yours.", param="id", code="memory_not_found"
        ) from exc


def api_memories_list(*, key: ApiKey, state: str) -> dict[str, Any]:
    states = STATE_FILTERS.get(state or "listed")
    if states is None:
        raise bad(f"'state' must be one of {', '.join(STATE_FILTERS)}.", "state")
    rows = memory_list(owner=key.owner_id, states=states)
    return {"object": "list", "data": [memory_json(memory) for memory in rows]}


def _text(body: dict[str, Any], *, required: bool) -> str | None:
    text = body.get("text")
    if text is None and not required:
        return None
    if not isinstance(text, str):
        raise bad("'text' must be a string, e.g. \"Call me Sam\".", "text")
    return text


def api_memory_create(*, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    text = _text(body, required=True)
    try:
        memory = services.memory_add(owner=key.owner_id, text=text or "")
    except services.MemoryRefused as exc:
        raise _refused(exc, "text") from exc
    return memory_json(memory, history=True)


def api_memory_get(*, key: ApiKey, memory_id: str) -> dict[str, Any]:
    return memory_json(_owned(key, memory_id), history=True)


def api_memory_update(*, key: ApiKey, memory_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """A new ``text`` and/or ``state`` (active: keep a proposal or resume; paused; dismissed;
    deleted)."""
    memory = _owned(key, memory_id)
    unknown = sorted(set(body) - {"text", "state"})
    if unknown:
        raise bad(f"Unknown field '{unknown[0]}'; a memory takes 'text' and 'state'.", unknown[0])
    text, state = _text(body, required=False), body.get("state")
    if state is not None and state not in _MOVES:
        raise bad(f"'state' must be one of {', '.join(_MOVES)}.", "state")
    try:
        if text is not None:
            memory = (
                services.memory_keep(memory=memory, text=text)
                if memory.state == Memory.State.PROPOSED and state == Memory.State.ACTIVE
                else services.memory_edit(memory=memory, text=text)
            )
        if state is not None:
            memory = _MOVES[state](memory)
    except services.MemoryRefused as exc:
        raise _refused(exc, "state" if text is None else "text") from exc
    return memory_json(memory, history=True)


def api_memory_delete(*, key: ApiKey, memory_id: str) -> dict[str, Any]:
    memory = _owned(key, memory_id)
    try:
        services.memory_delete(memory=memory)
    except services.MemoryRefused as exc:
        raise _refused(exc, "id") from exc
    return {"id": memory.pk, "object": "memory.deleted", "deleted": True}
