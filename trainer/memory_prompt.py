"""How a person's memories go into a prompt: the served form, as pure functions (serving
puts them in requests with it, the trainer builds the teacher's prompt and the gate's with it).

The form is ``PARLEY_MEMORY_FORM``: ``appended`` (the default) adds them to the last user
message after a ``[Remember]`` marker, ``system`` puts them in a system message, ``both`` does
both. ``python -m bench.memory_forms`` measures the three on held-out prompts; the 135M default
model follows what sits in the user's message far more than a system message.

>>> served_messages([{"role": "user", "content": "Hi"}], ["Call me Sam"], form="appended")
[{'role': 'user', 'content': 'Hi\\n\\n[Remember] Call me Sam.'}]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

FORMS = ("appended", "system", "both")
MARKER = "\n\n[Remember] "
SYSTEM_HEADING = "What you know about the user (follow it in every answer):"


def sentence(text: str) -> str:
    """A memory as one sentence: stripped, ending in a full stop unless it ends in one."""
    text = " ".join(text.split())
    return text if not text or text[-1] in ".!?。！？" else text + "."


def memory_block(texts: Sequence[str]) -> str:
    """The memories as the text appended to a user message (after ``MARKER``)."""
    return " ".join(sentence(text) for text in texts)


def approx_tokens(text: str) -> int:
    """An upper estimate of the tokens a text takes (a byte-level BPE gives about one token
    per 3–4 bytes of English and 1–2 per CJK character): bytes / 3, rounded up."""
    return math.ceil(len(text.encode()) / 3)


def served_tokens(texts: Sequence[str], form: str = "appended") -> int:
    """The estimated tokens ``texts`` add to every request in ``form``."""
    if not texts:
        return 0
    appended = approx_tokens(MARKER + memory_block(texts))
    system = approx_tokens(_system_text(texts)) + 4
    return {"appended": appended, "system": system, "both": appended + system}[form]


def _system_text(texts: Sequence[str]) -> str:
    return SYSTEM_HEADING + "".join(f"\n- {sentence(text)}" for text in texts)


def _with_text(content: Any, extra: str) -> Any:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": extra}]
    return f"{content or ''}{extra}"


def served_messages(
    messages: Sequence[dict[str, Any]], texts: Sequence[str], *, form: str = "appended"
) -> list[dict[str, Any]]:
    """``messages`` as the model is given them with the memories ``texts`` in ``form``.

    The input is not changed. Without memories, or without a user message for the appended
    form, the messages are returned as they are (a copy).
    """
    if form not in FORMS:
        raise ValueError(f"unknown memory form {form!r}; one of {', '.join(FORMS)}")
    out = [dict(message) for message in messages]
    if not texts:
        return out
    if form in ("appended", "both"):
        for message in reversed(out):
            if message.get("role") == "user":
                message["content"] = _with_text(
                    message.get("content"), MARKER + memory_block(texts)
                )
                break
    if form in ("system", "both"):
        system = _system_text(texts)
        if out and out[0].get("role") == "system":
            out[0]["content"] = _with_text(out[0].get("content"), "\n\n" + system)
        else:
            out.insert(0, {"role": "system", "content": system})
    return out
