"""Which turns hold a secret, so that their samples are kept but never trained.

A turn's training text is its whole context (system prompt, the person's messages, earlier
answers and their tool calls, tool results) and its answer, and beside them what taught it: the
next message, the comment, the correction, the judge's hint. A secret in any of these keeps the
sample out of every update, a shared lineage's included; the sample stays, with the reason, for
the admin and My model to show (docs/security.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from webapp.learning.secret_scan import secret_kinds

SECRET_REASON = "contains a secret"

_WHERE = {
    "system": "the system prompt",
    "user": "a message of the person",
    "assistant": "an earlier answer",
    "tool": "a tool result",
}


def _content_text(content: Any) -> str:
    """A message's text, whether a string or OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def tool_call_texts(tool_calls: Any) -> Iterable[str]:
    """What tool calls say: each call's name and its arguments' values, decoded from the JSON
    they travel in (a call that writes "password: …" to a file has it inside a string)."""
    for call in tool_calls if isinstance(tool_calls, list) else []:
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        arguments = function.get("arguments", "") if isinstance(function, Mapping) else ""
        try:
            decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            decoded = arguments
        yield "\n".join(_strings(decoded))


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from (f"{key}: {text}" for text in _strings(item))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif value is not None:
        yield str(value)


def _context_texts(prompt_messages: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, str]]:
    for message in prompt_messages:
        where = _WHERE.get(str(message.get("role")), "the context")
        yield where, _content_text(message.get("content"))
        for text in tool_call_texts(message.get("tool_calls")):
            yield "a tool call", text


def turn_secret(
    *, prompt_messages: Iterable[Mapping[str, Any]], texts: Mapping[str, str | None]
) -> str | None:
    """Why this turn may not train ("contains a secret: AWS Access Key in a tool result"), or
    None when no secret is found. ``texts`` names the turn's other texts ("the answer": …)."""
    found: dict[str, str] = {}
    for where, text in [*_context_texts(prompt_messages), *texts.items()]:
        for kind in secret_kinds(text or ""):
            found.setdefault(kind, where)
    if not found:
        return None
    named = "; ".join(f"{kind} in {where}" for kind, where in found.items())
    return f"{SECRET_REASON}: {named}"


def holds_secret(sample_reason: str) -> bool:
    """Whether a sample's exclusion reason is a secret found in its turn."""
    return sample_reason.startswith(SECRET_REASON)
