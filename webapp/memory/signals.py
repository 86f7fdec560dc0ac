"""Who is told when a person's memories change: processes that keep a copy of them (the /v1
admission remembers a key's memories for a moment) forget it, so a deletion leaves serving at
once in this process; other processes see it within their own check (``FRESH_S``)."""

from __future__ import annotations

from collections.abc import Callable

_listeners: list[Callable[[int], None]] = []


def on_memories_changed(listener: Callable[[int], None]) -> Callable[[int], None]:
    """Register ``listener(owner_id)`` (a decorator)."""
    _listeners.append(listener)
    return listener


def memories_changed(*, owner_id: int) -> None:
    for listener in _listeners:
        listener(owner_id)
