"""The channel-layer group of a conversation's open pages, and the event that reaches them.

The websocket consumer joins the group; anything that has news for an open page (the
learning loop's status of an answer) sends it a fragment of HTML, which the consumer passes on
to the browser as it is.
"""

from __future__ import annotations


def conversation_group(conversation_id: int) -> str:
    """The group every open page of the conversation belongs to."""
    return f"conversation-{conversation_id}"


def fragment_event(html: str) -> dict[str, str]:
    """The event that sends ``html`` to each page of a group (``ChatConsumer.chat_fragment``)."""
    return {"type": "chat.fragment", "html": html}
