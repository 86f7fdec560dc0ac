"""HTML fragments of the chat page, shared by the views (htmx) and the websocket consumer.

Fragments sent over the websocket are swapped in by the htmx ws extension: a top-level element
with an ``id`` replaces the element with that id, or, with another ``hx-swap-oob`` strategy
(``beforeend``, ``innerHTML``), puts its children into it that way. Streamed text is rendered
here and nowhere else, by the sanitising markdown renderer of the stored messages.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.html import escape

from webapp.chat.models import Conversation, Message
from webapp.chat.rendering import render_markdown
from webapp.chat.titles import title_fragments
from webapp.frontdoor.selectors import PageEntry, page_entry, page_transcript
from webapp.learning.comparisons import comparison_view
from webapp.learning.selectors import learning_status
from webapp.memory.selectors import proposals_for_answers

STATUS_POLLS = 90
"""How many times (2 s apart) an answer asks for its status while its feedback waits for the
judge; after that the status is pushed when the judge gets to it."""


FIRST_MESSAGES = (
    "Suggest a name for a cat.",
    "Explain what a rainbow is in two sentences.",
    "Write a short poem about coffee.",
    "Give me three tips for sleeping better.",
)
"""What an empty chat offers to send first (``templates/chat/_guide.html``)."""


def feedback_context() -> dict[str, Any]:
    return {"tags_up": settings.FEEDBACK_TAGS_UP, "tags_down": settings.FEEDBACK_TAGS_DOWN}


def render_message(entry: PageEntry) -> str:
    return render_to_string("chat/_message.html", {"entry": entry, **feedback_context()})


def render_message_by_id(*, message: Message, viewer: Any) -> str:
    return render_message(page_entry(message=message, viewer=viewer))


def render_feedback(
    *, message: Message, viewer: Any, panel_open: bool = False, saved: bool = False
) -> str:
    """The answer's feedback bar; ``panel_open``: with its panel (reasons, comment, the answer
    wanted) open, ``saved``: saying that what was written there is kept."""
    entry = page_entry(message=message, viewer=viewer)
    bar = render_to_string(
        "chat/_feedback.html",
        {"entry": entry, "panel_open": panel_open, "saved": saved, **feedback_context()},
    )
    # below the answer, out of band: what a 👎 offers to compare (or nothing, once withdrawn)
    rating = entry.feedback.rating if entry.feedback is not None else 0
    compare = render_to_string(
        "chat/_compare_load.html", {"message": message, "rating": rating, "oob": True}
    )
    return bar + compare


def render_learning_status(*, message: Message, poll: int = 0, viewer: Any = None) -> str:
    """The status under an answer (``learning.selectors.learning_status``); ``poll``: how many
    times the page has asked while it was pending.

    With ``viewer``, once the feedback is judged (the page stops asking), the memories proposed
    from it come along out of band (``templates/memory/_proposals.html``): the judge proposes
    them, so they appear under the answer without a reload. Not while it is pending, so a
    proposal being edited under the answer is not replaced every 2 s."""
    status = learning_status(message_id=message.pk)
    html = render_to_string(
        "chat/_learning_status.html",
        {
            "message_id": message.pk,
            "status": status,
            "poll": poll,
            "stop_polling": poll >= STATUS_POLLS,
        },
    )
    if viewer is None or (status is not None and status.pending):
        return html
    return html + render_proposals(message=message, viewer=viewer)


def render_proposals(*, message: Message, viewer: Any) -> str:
    """The memories proposed under an answer, out of band, in place of those the page shows."""
    proposals = proposals_for_answers(owner=viewer, message_ids=[message.pk])
    return render_to_string(
        "memory/_proposals.html",
        {"message_id": message.pk, "proposals": proposals.get(message.pk, []), "oob": True},
    )


def render_compare(*, message: Message, error: str = "") -> str:
    """Below a 👎'd answer, the comparison: the answers sampled beside ``message`` to choose from,
    where they stand while they are on their way (asked again every few seconds, and at once
    when their job changes), why none could be written, or the choice made."""
    view = comparison_view(disliked=message)
    return render_to_string(
        "chat/_compare.html", {"message": message, "view": view, "error": error}
    )


def render_transcript(*, conversation: Conversation, viewer: Any) -> str:
    return render_to_string(
        "chat/_transcript.html",
        {
            "entries": page_transcript(conversation=conversation, viewer=viewer),
            **feedback_context(),
        },
    )


def conversation_item(*, conversation: Conversation) -> str:
    """The conversation's entry in the list and the page header's title, replacing those on
    the page (its title changed)."""
    return title_fragments(conversation)


def append_to_transcript(html: str) -> str:
    return f'<div id="transcript" hx-swap-oob="beforeend">{html}</div>'


def stream_markdown(*, message_id: int, text: str) -> str:
    """The answer written so far, as markdown, in place of what its stream element shows."""
    return (
        f'<div id="message-{message_id}-stream" class="stream" hx-swap-oob="innerHTML">'
        f"{render_markdown(text)}</div>"
    )


def stream_notice(*, message_id: int, text: str) -> str:
    return f'<p id="message-{message_id}-notice" class="notice" role="status">{escape(text)}</p>'


def composer_state(*, state: str, saved: bool = False, error: str = "") -> str:
    """Tells chat.js whether an answer is being written and whether the typed text was saved.

    The composer is only cleared once the server says the message is stored, so a message
    typed while the connection is down is never lost.
    """
    return (
        f'<div id="composer-state" data-state="{escape(state)}" data-saved="{int(saved)}" '
        f'role="status" class="composer-state">{escape(error)}</div>'
    )
