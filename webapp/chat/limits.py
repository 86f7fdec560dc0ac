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


def context_room_problem(
    *, prompt_tokens: int, asked: int, window: int, memories: int = 0
) -> str | None:
    """Why an answer would not fit the model's context window (the conversation so far, the
    person's memories served with it, and the answer's length), or None when it fits.

    >>> context_room_problem(prompt_tokens=100, asked=512, window=8192) is None
    True
    >>> print(context_room_problem(prompt_tokens=7900, asked=512, window=8192, memories=2))
    This conversation no longer fits what the model can read: 7,900 tokens with your 2 memories, \
and room for a 512-token answer, in a 8,192-token window. Start a new conversation, or pause \
some memories.
    """
    if prompt_tokens + asked <= window:
        return None
    served = {0: "so far", 1: "with your memory"}.get(memories, f"with your {memories} memories")
    pause = ", or pause some memories" if memories else ""
    return (
        f"This conversation no longer fits what the model can read: {prompt_tokens:,} tokens "
        f"{served}, and room for a {asked:,}-token answer, in a {window:,}-token window. "
        f"Start a new conversation{pause}."
    )
