"""What an agent rewrites in a session's messages from one request to the next, and what stays.

Agents resend the whole session with every request, but not byte for byte. OpenClaw
(2026.9.6, read from its bundled source and from the requests it sent):

- its system prompt carries the date ("Current date: 2026-12-07") and gains or loses whole
  sections ("## Bootstrap Pending" while a workspace's BOOTSTRAP.md waits, "## Conversation
  Context" in a memory flush). ``webapp.api.sessions`` matches a system message by its role
  alone, so no rule here is needed for it;
- its runtime line, built by ``buildRuntimeLine`` (openclaw/dist/system-prompt-params-*.mjs),
  is moved out of the system prompt to the end of the first user message
  (``relocateNonBehavioralRegion`` in @openclaw/ai/dist/openai-completions-stream-*.mjs): after
  a blank line in a text message, or as a text part of its own, which /v1 joins with no break.
  Its fields change within one session: ``repo=…/workspace`` appears once a workspace exists,
  ``model=`` follows ``/model``, and a memory flush runs under a session key of its own
  (``session=agent:main:internal-session-effects:…``).

The rules below take those parts out before two copies of a message are compared; what is left
(the user's words and the time stamp OpenClaw put on them when they were written) still tells
one session from another, and a session's answers must match as well. The messages are stored
as they were sent: the rules are for matching only.

>>> steady("[Mon 2026-12-07 23:44 UTC] Hi\\n\\nRuntime: agent=main | host=vm | repo=/w")
'[Mon 2026-12-07 23:44 UTC] Hi'
>>> steady_head("[Mon 2026-12-07 23:44 UTC] Hi\\n\\nRuntime: agent=main | host=vm")
'[Mon 2026-12-07 23:44 UTC] Hi'
"""

from __future__ import annotations

import re

# (what changes, what it becomes): every rule in one place, applied in order.
RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # OpenClaw's runtime line, whole: ``[name=… | ]agent=… | session=… | … | shell=…``.
    (re.compile(r"Runtime: (?:name=[^|\n]*\| )?agent=[^\n]*"), ""),
)


def steady(content: str) -> str:
    """``content`` with what an agent rewrites within a session taken out (for comparing)."""
    for pattern, replacement in RULES:
        content = pattern.sub(replacement, content)
    return content.strip()


def steady_head(content: str) -> str:
    """The start of ``content`` that no rule touches: every copy of it starts so."""
    starts = [found.start() for pattern, _ in RULES if (found := pattern.search(content))]
    return content[: min(starts)].rstrip() if starts else content
