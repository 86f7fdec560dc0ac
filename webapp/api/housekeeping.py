"""OpenClaw's housekeeping requests: the calls it makes for itself, not for its user.

OpenClaw (2026.9.6) sends no header that marks them, so they are told by the text it puts in
them, read from its bundled source (``node_modules/openclaw/dist/``) and seen in the requests it
sent to a recording server:

- **summary** (compaction, the compaction safeguard's staged and merged summaries, a split
  turn's prefix, a branch summary): a system message of its own, ``SUMMARIZATION_SYSTEM_PROMPT``
  in ``dist/compaction-CAzwgOuQ.mjs`` (also used by ``generateBranchSummary`` in
  ``dist/agent-core-DG5aPUnb.mjs``), which starts
  "You are a context summarization assistant.", then one user message
  "<conversation>\\n[User]: …\\n</conversation>\\n\\n" and the instructions. No tools, no
  history, no runtime line.
- **memory flush** (before compaction, when the memory plugin is on):
  ``DEFAULT_MEMORY_FLUSH_PROMPT`` in ``dist/extensions/memory-core/index.js``, the last user
  message, starts "Pre-compaction memory flush."; ``DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT``, added
  to the system prompt, starts "Pre-compaction memory flush turn.". It resends the session's
  history, under a runtime line of its own (``session=agent:main:internal-session-effects:…``).
- **heartbeat** (the gateway's periodic check): ``HEARTBEAT_PROMPT`` in
  ``dist/heartbeat-vWflpIwS.mjs``, the last user message, starts "Follow the heartbeat monitor
  scratch context when provided."; a configured prompt gets "Use heartbeat_respond to report
  the wake outcome." appended (``resolveHeartbeatPromptForResponseTool``, same file); older
  workspaces hold the earlier default, "Read HEARTBEAT.md if it exists", which
  ``DEFAULT_HEARTBEAT_PROMPT_CONTEXT_BLOCK`` in ``dist/system-prompt-params-DdCWVctq.mjs``
  still names.

A marker counts only where OpenClaw puts it: a heartbeat's or a flush's prompt in the *last*
user message (neither is kept in the history OpenClaw sends afterwards, so a later turn is not
taken for one), the summary's and the flush's instructions in the system message.

>>> housekeeping_kind([{"role": "system", "content": "You are a context summarization "
...     "assistant. Your task is to read a conversation"}, {"role": "user", "content": "x"}])
<Housekeeping.SUMMARY: 'summary'>
>>> housekeeping_kind([{"role": "user", "content": "What is a summary?"}]) is None
True
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Housekeeping(StrEnum):
    SUMMARY = "summary"
    MEMORY_FLUSH = "memory flush"
    HEARTBEAT = "heartbeat"


SYSTEM, LAST_USER = "system", "last user"

# (kind, where OpenClaw puts the text, the text): OpenClaw's own wording, as in its source.
MARKERS: tuple[tuple[Housekeeping, str, str], ...] = (
    (Housekeeping.SUMMARY, SYSTEM, "You are a context summarization assistant."),
    (Housekeeping.MEMORY_FLUSH, SYSTEM, "Pre-compaction memory flush turn."),
    (Housekeeping.MEMORY_FLUSH, LAST_USER, "Pre-compaction memory flush."),
    (
        Housekeeping.HEARTBEAT,
        LAST_USER,
        "Follow the heartbeat monitor scratch context when provided.",
    ),
    (Housekeeping.HEARTBEAT, LAST_USER, "Use heartbeat_respond to report the wake outcome."),
    (Housekeeping.HEARTBEAT, LAST_USER, "Read HEARTBEAT.md if it exists"),
)


def housekeeping_kind(messages: list[dict[str, Any]]) -> Housekeeping | None:
    """Which of OpenClaw's housekeeping calls ``messages`` is (parsed /v1 messages), or None."""
    texts = {
        SYSTEM: "\n".join(m.get("content") or "" for m in messages if m["role"] == "system"),
        LAST_USER: next(
            (m.get("content") or "" for m in reversed(messages) if m["role"] == "user"), ""
        ),
    }
    return next((kind for kind, where, text in MARKERS if text in texts[where]), None)
