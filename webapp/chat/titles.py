"""Conversation titles: the first message's words at once, then a few words from the model.

A conversation is named by its first user message as soon as it is sent
(``services.derived_title``). Once its first answer is complete, the judge queue asks the model
for a short title (``suggest_conversation_title`` in webapp/chat/tasks.py), and the open pages
of the conversation get the new sidebar entry and header over the channel layer.

The model is the judge's endpoint (``JUDGE_BASE_URL`` / ``JUDGE_MODEL``: by default the base
model on Parley's own vLLM, asked behind chat), greedy and for a few tokens. The prompt holds
the first message alone, after a few examples: with SmolLM2-135M, adding the answer made it
continue the answer instead of naming it. The answer still counts when the reply is checked.
A small model often writes no title at all (a sentence, a loop, a different subject), so a reply
is kept only when it cleans up into a few words that share a word with the conversation;
otherwise the first-message title stays. A title the user gave (``title_from_user``) is never
replaced, and a model that does not answer is logged and left alone: a title is not worth a
retry.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable

import httpx
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.template.loader import render_to_string
from django.utils.html import format_html

from webapp.chat.envelope import user_words
from webapp.chat.groups import conversation_group, fragment_event
from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import transcript
from webapp.core.outbox import Task, enqueue

log = logging.getLogger(__name__)

TITLE_LENGTH = 60
"""The longest title shown in the sidebar, in characters (both kinds of title)."""
TITLE_MAX_WORDS = 10
"""A reply with more words is a sentence, not a title (the prompt asks for 2 to 6)."""
TITLE_MAX_TOKENS = 16
REQUEST_CHARS = 600
"""How much of the first message the prompt quotes: the subject is in its opening."""
TIMEOUT_S = 120.0

Complete = Callable[[list[dict[str, str]]], str]
"""The model's reply to a chat prompt (``ask_model``, or a test's fake)."""

SYSTEM = "You name conversations. Reply with a title of 2 to 6 words and nothing else."
EXAMPLES = (
    ("How do I boil an egg so the yolk stays soft?", "Soft-Boiled Eggs"),
    ("Can you recommend some books about the Roman Empire?", "Roman Empire Book Recommendations"),
    ("write a bash script that renames all .txt files to .md", "Bash Script to Rename Files"),
    ("hello there", "Greeting"),
)
"""Few-shot examples: the 135M model copies their form (a noun phrase, no quotes, no period)
far more reliably than it follows the instruction alone."""

_LEAD_IN = re.compile(r"^(?:here(?:'s| is)\b.*|.*\btitle\b.*):$", re.IGNORECASE)
_LABEL = re.compile(r"^(?:title|titre|título|titolo|titel)\s*[:：-]\s*", re.IGNORECASE)
_BULLET = re.compile(r"^(?:#{1,6}|[-*+•>]|\d{1,2}[.)])(?:\s+|$)")
_MARKUP = re.compile(r"\*\*|__|`+|~~|(?<!\w)[*_]|[*_](?!\w)")
_QUOTES = "\"'“”‘’«»„‚「」『』‹›"
_TRAILING = ".,;:!…-–—·" + _QUOTES
_SENTENCE_BREAK = re.compile(r"[.!?。！？]\s+\S")
_WORD = re.compile(r"\w+")
# Replies that open like an answer, not a name (English: the model's usual openings).
_ANSWER_OPENINGS = frozenset(
    "i i'm i'd i'll sure certainly here here's sorry yes no okay ok hello hi".split()
)
# Words too common to tie a title to a conversation.
_COMMON = frozenset(
    "about after also been before does from have help into just like make more need only "
    "some than that them then there these they this very want what when where which while "
    "will with would your".split()
)


def title_prompt(request: str) -> list[dict[str, str]]:
    """The chat prompt that asks for a title of the conversation ``request`` opens."""
    messages = [{"role": "system", "content": SYSTEM}]
    for example, title in EXAMPLES:
        messages.append({"role": "user", "content": f"Message: {example}\nTitle:"})
        messages.append({"role": "assistant", "content": title})
    text = " ".join(request.split())
    if len(text) > REQUEST_CHARS:
        text = text[:REQUEST_CHARS].rsplit(" ", 1)[0] + " …"
    messages.append({"role": "user", "content": f"Message: {text}\nTitle:"})
    return messages


def _first_line(reply: str) -> str:
    """The line that holds the title: the first, or the one after a lead-in ("Title:")."""
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if _LEAD_IN.match(line) and index + 1 < len(lines):
            continue
        return line
    return ""


def _peel(reply: str) -> str:
    """The title line without label, markdown, quotes or end punctuation."""
    text = _first_line(reply)
    for _ in range(3):  # "1. **Title:** “Name”." peels in a few rounds
        before = text
        text = _BULLET.sub("", text)
        text = _MARKUP.sub("", text).strip()
        text = _LABEL.sub("", text)
        text = text.strip().strip(_QUOTES).strip().rstrip(_TRAILING).strip()
        if text == before:
            break
    return " ".join(text.split())


def _shorten(text: str) -> str:
    if len(text) <= TITLE_LENGTH:
        return text
    return text[: TITLE_LENGTH - 1].rsplit(" ", 1)[0].rstrip(_TRAILING + " ") + "…"


def clean_title(reply: str) -> str:
    """The title in a model's reply: one line, no label, markdown, quotes or end punctuation,
    at most ``TITLE_LENGTH`` characters ("" when nothing is left).

    >>> clean_title('Title: "**Soft-Boiled Eggs**."')
    'Soft-Boiled Eggs'
    >>> clean_title("Here's a possible title:\\n\\n# Lisbon Trip Plan\\nDay 1: ...")
    'Lisbon Trip Plan'
    """
    return _shorten(_peel(reply))


def _stems(text: str) -> set[str]:
    """Words of four letters or more, case and accents ignored, cut to five letters (so that
    "photosynthesis" meets "photosynthèse"); a character of a script without spaces is a word."""
    plain = "".join(
        c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c)
    )
    stems: set[str] = set()
    for word in _WORD.findall(plain):
        wide = {c for c in word if unicodedata.east_asian_width(c) == "W"}
        if wide:
            stems |= wide
        elif len(word) >= 4 and word not in _COMMON:
            stems.add(word[:5])
    return stems


_EXAMPLE_STEMS = _stems(" ".join(f"{message} {title}" for message, title in EXAMPLES))


def title_from_reply(reply: str, *, request: str, answer: str = "") -> str:
    """The model's title when it is one: a few words (not a sentence, not a loop) that share a
    word with the first message or its answer; "" when the reply is no usable title.

    >>> title_from_reply("Capital of France: Paris", request="What is the capital of France?")
    'Capital of France: Paris'
    >>> title_from_reply("Bienvenida!", request="Plan a 3-day trip to Lisbon")
    ''
    """
    title = _peel(reply)
    head, colon, _ = title.partition(": ")
    if colon and len(title.split()) > TITLE_MAX_WORDS and len(head.split()) >= 2:
        title = head  # "Causes of World War I: The Triple Alliance and …" names it by its head
    words = title.split()
    if not words or len(words) > TITLE_MAX_WORDS or not any(c.isalnum() for c in title):
        return ""
    if words[0].casefold().rstrip(",!") in _ANSWER_OPENINGS or _SENTENCE_BREAK.search(title):
        return ""
    long_words = [w.casefold() for w in _WORD.findall(title) if len(w) >= 4]
    if len(long_words) != len(set(long_words)):  # "Photosynthesis and Photosynthesis"
        return ""
    stems, context = _stems(title), _stems(request) | _stems(answer)
    if not stems & context or (stems & _EXAMPLE_STEMS) - context:  # unrelated, or copied
        return ""
    return _shorten(title)


def title_suggestion_queue(*, answer: Message) -> None:
    """After ``answer`` is recorded: when it is the conversation's first complete main-line
    answer, queue the model's title (once the transaction commits)."""
    conversation = answer.conversation
    if (
        not settings.MODEL_TITLES
        or answer.status != Message.Status.COMPLETE
        or answer.turn_type != Message.TurnType.MAIN
        or conversation.title_from_user
    ):
        return
    answered_before = (
        Message.objects.filter(
            conversation=conversation,
            role=Message.Role.ASSISTANT,
            turn_type=Message.TurnType.MAIN,
            status=Message.Status.COMPLETE,
        )
        .exclude(pk=answer.pk)
        .exists()
    )
    if not answered_before:
        enqueue(Task.SUGGEST_CONVERSATION_TITLE, conversation.pk)


def ask_model(messages: list[dict[str, str]]) -> str:
    """The judge endpoint's greedy reply, less a last line cut off by the token limit (a title
    stopped mid-word is no title). Raises ``httpx.HTTPError`` when the model does not answer."""
    body: dict[str, object] = {
        "model": settings.JUDGE_MODEL,
        "messages": messages,
        "max_tokens": TITLE_MAX_TOKENS,
        "temperature": 0.0,  # greedy: a redelivered task writes the same title
    }
    if settings.JUDGE_PRIORITY:  # behind chat on a shared vLLM, as the judge asks
        body["priority"] = settings.JUDGE_PRIORITY
    key = settings.JUDGE_API_KEY
    response = httpx.post(
        settings.JUDGE_BASE_URL.rstrip("/") + "/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key}"} if key else {},
        timeout=TIMEOUT_S,
    )
    response.raise_for_status()
    choice = response.json()["choices"][0]
    text = choice["message"].get("content") or ""
    if choice.get("finish_reason") == "length":
        text = text.rpartition("\n")[0]
    return text


def _opening(conversation: Conversation) -> tuple[str, str]:
    """The words of the first user message on the transcript, and of the answer after it."""
    request = answer = ""
    for entry in transcript(conversation=conversation):
        message = entry.message
        if not request:
            if message.role == Message.Role.USER:
                request = user_words(message.content)
        elif (
            message.role == Message.Role.ASSISTANT
            and message.turn_type == Message.TurnType.MAIN
            and message.status == Message.Status.COMPLETE
        ):
            answer = message.content
            break
    return request, answer


def conversation_title_suggest(conversation_id: int, *, complete: Complete) -> str | None:
    """Ask ``complete`` for the conversation's title and record it; the title, or None when the
    conversation keeps the one it has (named by the user, gone, no usable reply, no model)."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None or conversation.title_from_user:
        return None
    request, answer = _opening(conversation)
    if not request:
        return None
    try:  # a model that is down, refuses, or answers out of shape: no title, no retry
        reply = complete(title_prompt(request))
    except (httpx.HTTPError, ValueError, LookupError) as exc:
        log.warning("no title for conversation %s: %s", conversation_id, exc)
        return None
    title = title_from_reply(reply, request=request, answer=answer)
    if not title:
        log.info("conversation %s keeps its title; the model wrote %r", conversation_id, reply)
        return None
    return title if conversation_title_record(conversation_id, title=title) else None


@transaction.atomic
def conversation_title_record(conversation_id: int, *, title: str) -> bool:
    """Give the conversation the model's ``title`` unless the user named it meanwhile; its
    open pages show it once the transaction commits."""
    conversation = Conversation.objects.select_for_update().filter(pk=conversation_id).first()
    if conversation is None or conversation.title_from_user:
        return False
    if conversation.title != title:
        conversation.title = title
        conversation.save(update_fields=["title"])
        transaction.on_commit(lambda: _push(conversation_id))
    return True


def title_fragments(conversation: Conversation) -> str:
    """The conversation's sidebar entry and the page header's title, swapped in out of band."""
    item = render_to_string(
        "chat/_conversation_item.html",
        {"conversation": conversation, "current_id": conversation.pk, "oob": True},
    )
    header = format_html(
        '<h1 class="conversation-title" id="conversation-title-text" hx-swap-oob="true">{}</h1>',
        conversation.title,
    )
    return item + header


def _push(conversation_id: int) -> None:
    # Read again: a rename committed since then has already redrawn the header itself.
    conversation = Conversation.objects.filter(pk=conversation_id, title_from_user=False).first()
    layer = get_channel_layer()
    if conversation is None or layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            conversation_group(conversation.pk), fragment_event(title_fragments(conversation))
        )
    except Exception:  # an open page that misses the title sees it on its next load
        log.warning("could not push the title of conversation %s", conversation.pk, exc_info=True)
