"""What OpenClaw 2026.9.6 really sends, as the tests' examples: copied from the requests it sent
to a recording server (``openclaw agent --local``, the documented slim profile with a 4,096-token
window so that it compacted within a few turns, and once with its memory plugin and memory
flush on), and from its bundled source where a request was not seen (the heartbeat)."""

from __future__ import annotations

STAMP = "[Mon 2026-12-07 23:44 UTC]"

RUNTIME = (
    "Runtime: agent=main | session=agent:main:explicit:cap1 | sessionId=cap1 | host=vm | "
    "os=Linux 6.18.44-fc-v1300 (x64) | node=v24.21.0 | active_node=unknown | "
    "model=parley/parley | default_model=parley/parley | shell=bash"
)
# The first user message of a session, with the runtime line OpenClaw moves into it.
FIRST = f"{STAMP} What is the capital of France?\n\n{RUNTIME}"
# The same message once a workspace exists: ``repo=`` joins the line, after ``host=``
# (the order of ``buildRuntimeLine``).
FIRST_WITH_WORKSPACE = FIRST.replace(
    "host=vm | ", "host=vm | repo=/home/sam/.openclaw/workspace | "
)
# The same message in the session's memory flush, which runs under a session key of its own.
FIRST_IN_MEMORY_FLUSH = FIRST.replace(
    "session=agent:main:explicit:cap1 | sessionId=cap1",
    "session=agent:main:internal-session-effects:cd18aabe-7d63-4e86-a8fd-2226d01939bd-"
    "033f6f33f561937b | sessionId=internal-session-effects-cd18aabe-7d63-4e86-a8fd-"
    "2226d01939bd-033f6f33f561937b",
)
# After compaction the summary is the first user message; the runtime line is a text part of
# its own, which /v1 joins to the summary with no break.
COMPACTED_FIRST = (
    "The conversation history before this point was compacted into the following summary:"
    '\n\n<summary>\n## Latest user request context\n"And Berlin?"\n\n## Decisions\nNone.\n'
    "</summary>" + RUNTIME
)

SYSTEM = (
    "<!-- openclaw:attempt:STABLE -->\nYou are a personal assistant running inside OpenClaw.\n"
    "## Tooling\nTools policy-filtered. Names case-sensitive; call exact.\n- read: Read files\n"
    "- exec: Run shell; pty for TTY CLIs\n<!-- /openclaw:attempt:STABLE -->\n"
    "<!-- openclaw:attempt:DYNAMIC -->\n## Temporal Context\nCurrent date: 2026-12-07\n"
    "Time zone: UTC\n"
)
# The system prompt a little later in the same session: a day on, and a bootstrap pending.
SYSTEM_LATER = SYSTEM.replace("2026-12-07", "2026-12-08") + (
    "## Bootstrap Pending\nRead workspace BOOTSTRAP.md; follow before normal reply.\n"
)

SUMMARY_SYSTEM = (
    "You are a context summarization assistant. Your task is to read a conversation between a "
    "user and an AI assistant, then produce a structured summary following the exact format "
    "specified.\n\nWhen a conversation line includes sender={...}, that JSON identifies the "
    "author of that user turn. The id is authoritative; name and username are readable labels "
    "only. Preserve attribution for material facts, preferences, instructions, decisions, and "
    "disagreements; never transfer them to another sender or an anonymous user. A user line "
    "without sender={...} is unattributed: preserve its facts as unattributed and do not "
    "assign them to a known sender.\n\nDo NOT continue the conversation. Do NOT respond to any "
    "questions in the conversation. ONLY output the structured summary."
)
SUMMARY_USER = (
    "<conversation>\n[User]: What is the capital of France?\n</conversation>\n\nProduce a "
    "compact, factual summary with these exact section headings:\n## Decisions\n## Open TODOs\n"
    "## Constraints/Rules\n## Pending user asks\n## Exact identifiers\nFor ## Exact "
    "identifiers, preserve literal values exactly as seen (IDs, URLs, file paths, ports, "
    "hashes, dates, times).\nDo not omit unresolved asks from the user.\n"
)
TURN_PREFIX_USER = (
    "<conversation>\n[User]: And Berlin?\n</conversation>\n\nThis is the PREFIX of a turn that "
    "was too large to keep. The SUFFIX (recent work) is retained.\n\nSummarize the prefix to "
    "provide context for the retained suffix:\n"
)

MEMORY_FLUSH_SYSTEM = SYSTEM + (
    "## Conversation Context\nPre-compaction memory flush turn. The session is near "
    "auto-compaction; capture durable memories to disk. Store durable memories only in "
    "memory/2026-12-07.md (create memory/ if needed). You may reply, but usually NO_REPLY is "
    "correct.\n"
)
MEMORY_FLUSH_USER = (
    "Pre-compaction memory flush. Store durable memories only in memory/2026-12-07.md (create "
    "memory/ if needed). Treat workspace bootstrap/reference files such as MEMORY.md, "
    "DREAMS.md, SOUL.md, and AGENTS.md as read-only during this flush; never overwrite, "
    "replace, or edit them. If memory/2026-12-07.md already exists, APPEND new content only "
    "and do not overwrite existing entries. Do NOT create timestamped variant files (e.g., "
    "2026-12-07-HHMM.md); always use the canonical 2026-12-07.md filename. If nothing to "
    "store, reply with NO_REPLY.\nCurrent time: Monday, December 7th, 2026 - 11:47 PM (UTC)\n"
    "Reference UTC: 2026-12-07 23:47 UTC"
)

# dist/heartbeat-vWflpIwS.mjs: HEARTBEAT_PROMPT, and a configured prompt with the response
# tool's instructions appended.
HEARTBEAT = (
    "Follow the heartbeat monitor scratch context when provided. Recurring tasks are "
    "automations; create or change their schedules with the automations tool, not heartbeat "
    "scratch. Do not infer or repeat old tasks from prior chats. If nothing needs attention, "
    "reply NO_REPLY."
)
HEARTBEAT_CONFIGURED = (
    "Check the build status.\n\nUse heartbeat_respond to report the wake outcome. Set "
    "notify=false when nothing needs the user's attention."
)
