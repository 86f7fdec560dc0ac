"""What text Parley can store: the limits every way in (page, websocket, /v1) checks.

PostgreSQL cannot store U+0000 in text or jsonb, so a NUL anywhere is refused before anything
is asked of the model or half stored.
"""

from __future__ import annotations

from typing import Any

MAX_MESSAGE_CHARS = 50_000
NUL = "\x00"


def contains_nul(value: Any) -> bool:
    """Whether a string, or any key or string inside a decoded JSON value, holds a NUL."""
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(contains_nul(item) for item in value)
    return False


def message_text_problem(content: str) -> str | None:
    """Why a message typed in the chat cannot be stored, or None when it can."""
    if len(content) > MAX_MESSAGE_CHARS:
        return f"Messages are limited to {MAX_MESSAGE_CHARS:,} characters."
    if contains_nul(content):
        return "Messages cannot contain NUL characters."
    return None
