"""One conversation as a file: Markdown to read, JSON to process.

Both hold what the owner sees on the chat page: the selected path through the conversation
(an answer's regenerated siblings that are not selected, and answers sampled only to compare
with, are left out, as the page leaves them out), each message with its role and time. The JSON
also holds the feedback the owner gave each answer. The full record, every sibling and token
included, is My data's export.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.text import slugify

from webapp.chat.feedback_spec import feedback_state
from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import TranscriptEntry

FORMAT = "parley-conversation/1"
AUTHORS: dict[str, str] = {Message.Role.USER: "You", Message.Role.ASSISTANT: "Parley"}
STATUS_NOTES = {
    Message.Status.STOPPED: "Stopped before the end.",
    Message.Status.FAILED: "No answer could be written.",
    Message.Status.STREAMING: "Still being written when exported.",
}


def author(message: Message) -> str:
    """Who wrote it, as the chat page says it."""
    return AUTHORS.get(message.role) or str(message.get_role_display())


def filename(conversation: Conversation, extension: str) -> str:
    """``parley-<the title as a slug>.<extension>``, the id standing in for no title."""
    stem = slugify(conversation.title)[:80].strip("-") or f"conversation-{conversation.pk}"
    return f"parley-{stem}.{extension}"


def attachment(conversation: Conversation, extension: str) -> str:
    """The Content-Disposition header of the download."""
    return content_disposition_header(True, filename(conversation, extension)) or "attachment"


def _when(at: datetime) -> str:
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M %Z")


def as_markdown(*, conversation: Conversation, entries: list[TranscriptEntry]) -> str:
    lines = [
        f"# {conversation.title or 'New conversation'}",
        "",
        f"Exported from Parley on {_when(timezone.now())}: {len(entries)} message(s), as the "
        "chat page shows them.",
    ]
    for entry in entries:
        message = entry.message
        lines += ["", f"## {author(message)} · {_when(message.created_at)}", ""]
        lines.append(message.content.rstrip() or "*(empty)*")
        if message.status in STATUS_NOTES:
            lines += ["", f"*{STATUS_NOTES[message.status]}*"]
    return "\n".join(lines) + "\n"


def _message(entry: TranscriptEntry) -> dict[str, Any]:
    message = entry.message
    record: dict[str, Any] = {
        "id": message.pk,
        **message.as_openai(),
        "author": author(message),
        "status": message.status,
        "created_at": message.created_at.isoformat(),
    }
    if message.is_assistant:
        record["feedback"] = feedback_state(entry.feedback) if entry.feedback else None
    return record


def as_json(*, conversation: Conversation, entries: list[TranscriptEntry]) -> str:
    document = {
        "format": FORMAT,
        "id": conversation.pk,
        "title": conversation.title,
        "source": conversation.source,
        "created_at": conversation.created_at.isoformat(),
        "exported_at": timezone.now().isoformat(),
        "messages": [_message(entry) for entry in entries],
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
