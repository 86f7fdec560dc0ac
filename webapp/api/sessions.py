"""Which conversation an API request belongs to, and recording its new messages.

OpenAI clients resend the whole history with every request. Parley keeps one conversation
per session and records only what is new:

- session = ``X-Session-Id``, else the open conversation of the same key whose main line is a
  prefix of this request's messages (or the request a prefix of it: a retried turn), else a
  new conversation. OpenAI's ``user`` field names the end user, not a session (clients send
  the same value with every chat), so it never joins two chats;
- a side turn (an agent's housekeeping: ``webapp.api.housekeeping``) whose history finds no
  conversation never opens one of its own: see ``_side_home``;
- the request's messages are matched against the conversation's main line; what follows the
  match is recorded after it (an edited history becomes a fork, never an overwrite);
- a main request's new user/tool messages are the *next state* of the answer they follow.

System messages match by role only: agents such as OpenClaw rewrite their system prompt
(dates, memory) on every request, which must not split a session; other messages match once
what agents rewrite in them (``webapp.api.rewrites``: OpenClaw's runtime line) is taken out.
An assistant message is the client's copy of Parley's answer, and agents rework it before they
send it back (tags stripped, whitespace trimmed, a tool call written as text turned into a
real one): a copy that is still close to the answer matches it, and where several
conversations match, the one with the most exact copies wins.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from webapp.api.models import ApiKey
from webapp.api.rewrites import steady, steady_head
from webapp.api.schemas import ChatRequest
from webapp.chat import services as chat_services
from webapp.chat.envelope import user_words
from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import transcript
from webapp.inference import CompletionAccumulator
from webapp.learning.models import PolicyVersion

PREFIX_CANDIDATES = 20
# How much of a message a side turn must quote for the quote to point to its session.
QUOTE_MIN_CHARS = 8


@dataclass(frozen=True)
class RecordedTurn:
    conversation: Conversation
    prompt_tail: Message  # the request's last message, as recorded
    new_messages: list[Message]


# How close a client's copy of an answer must be to the answer to stand for it: as a whole,
# or as the answer's own words in a few runs of at least two words each (a part cut out).
COPY_LIKENESS = 0.6
COPY_KEPT = 0.9
EXACT, COPY, DIFFERENT = 2, 1, 0
_TAG = re.compile(r"</?[A-Za-z_][\w:-]*>")


def _plain(text: str) -> str:
    """Text as a client may have reworked it: normalised, no tags or control marks, one space."""
    text = _TAG.sub(" ", unicodedata.normalize("NFKC", text))
    text = "".join(c for c in text if not unicodedata.category(c).startswith("C") or c.isspace())
    return " ".join(text.split())


def _call_ids(calls: Any) -> set[str]:
    return {c.get("id") for c in calls or [] if isinstance(c, dict) and c.get("id")}


def _kept_in_runs(ours: str, theirs: str) -> bool:
    """Whether ``theirs`` is ``ours`` with parts cut out: its words, in order, in runs."""
    words = theirs.split()
    matcher = difflib.SequenceMatcher(None, ours.split(), words, autojunk=False)
    kept = sum(b.size for b in matcher.get_matching_blocks() if b.size >= 2)
    return len(words) >= 2 and kept >= COPY_KEPT * len(words)


def _copy_of_answer(recorded: Message, sent: dict[str, Any]) -> bool:
    if _call_ids(recorded.tool_calls) & _call_ids(sent.get("tool_calls")):
        return True
    ours, theirs = _plain(recorded.content), _plain(sent.get("content") or "")
    if not theirs or theirs in ours or (ours and ours in theirs) or _kept_in_runs(ours, theirs):
        return True
    matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
    return matcher.quick_ratio() >= COPY_LIKENESS and matcher.ratio() >= COPY_LIKENESS


def _likeness(recorded: Message, sent: dict[str, Any]) -> int:
    if recorded.role != sent["role"]:
        return DIFFERENT
    if recorded.role == Message.Role.SYSTEM:
        return EXACT
    if recorded.role == Message.Role.TOOL and recorded.tool_call_id != sent.get("tool_call_id", ""):
        return DIFFERENT
    if steady(recorded.content) == steady(sent.get("content") or ""):
        return EXACT
    if recorded.role == Message.Role.ASSISTANT and _copy_of_answer(recorded, sent):
        return COPY
    return DIFFERENT


@dataclass(frozen=True)
class Match:
    length: int  # how many of the request's messages match the path, from the start
    exact: int  # how many of those are exact copies

    @property
    def rank(self) -> tuple[int, int]:
        return (self.length, self.exact)


def _match(path: list[Message], messages: list[dict[str, Any]]) -> Match:
    length = exact = 0
    for recorded, sent in zip(path, messages, strict=False):
        likeness = _likeness(recorded, sent)
        if likeness == DIFFERENT:
            break
        length += 1
        exact += likeness == EXACT
    return Match(length, exact)


def _main_path(conversation: Conversation) -> list[Message]:
    return [entry.message for entry in transcript(conversation=conversation)]


def _find_conversation(
    *, key: ApiKey, session_id: str, messages: list[dict[str, Any]]
) -> tuple[Conversation | None, list[Message]]:
    if session_id:
        conversation = (
            Conversation.objects.select_for_update()
            .filter(
                owner=key.owner,
                source=Conversation.Source.API,
                external_session_id=session_id,
                closed_at__isnull=True,
            )
            .order_by("-last_activity_at")
            .first()
        )
        return conversation, _main_path(conversation) if conversation else []
    best: tuple[Conversation | None, list[Message]] = (None, [])
    best_rank = (0, 0)
    # Only a request that carries an earlier answer can continue a conversation, and only one
    # holding the request's first user message (up to what agents rewrite in it): both are
    # cheap to check in SQL.
    first_user = next((m for m in messages if m["role"] == "user"), None)
    if first_user is None or not any(m["role"] == "assistant" for m in messages):
        return best
    candidates = (
        Conversation.objects.filter(
            api_key=key,
            external_session_id="",
            closed_at__isnull=True,
            messages__role=Message.Role.USER,
            messages__content__startswith=steady_head(first_user.get("content") or ""),
        )
        .distinct()
        .order_by("-last_activity_at")[:PREFIX_CANDIDATES]
    )
    for conversation in candidates:
        path = _main_path(conversation)
        # The conversation so far, then new messages; or a retry of one of its turns (an agent
        # sends the same request again after an answer it could not use): all of the request
        # matches, and its answer becomes a sibling of the earlier one.
        match = _match(path, messages)
        if path and match.length == min(len(path), len(messages)) and match.rank > best_rank:
            best, best_rank = (conversation, path), match.rank
    if best[0] is not None:
        Conversation.objects.select_for_update().filter(pk=best[0].pk).first()
    return best


def _quoted(conversation_ids: list[int], text: str) -> dict[int, int]:
    """How many characters of each conversation's main-line messages ``text`` quotes."""
    quoted: dict[int, int] = {}
    rows = Message.objects.filter(
        conversation_id__in=conversation_ids,
        turn_type=Message.TurnType.MAIN,
        role__in=(Message.Role.USER, Message.Role.ASSISTANT),
    ).values_list("conversation_id", "role", "content")
    for conversation_id, role, content in rows:
        words = user_words(content) if role == Message.Role.USER else content.strip()
        if len(words) >= QUOTE_MIN_CHARS and words in text:
            quoted[conversation_id] = quoted.get(conversation_id, 0) + len(words)
    return quoted


def _side_home(*, key: ApiKey, messages: list[dict[str, Any]]) -> Conversation | None:
    """The conversation of a side turn whose history finds none, or None when the key has none.

    An agent's summary call sends no history, only a transcript of the session in its one user
    message ("<conversation>", then "[User]: …" lines). Of the key's latest API conversations,
    open ones first, it belongs to the one whose messages it quotes most; where it quotes none
    (a merge of partial summaries, a heartbeat), to the first of them. Not to a conversation of
    its own: the agent makes the call for the session it is running, and its user would find
    one conversation in their list for every call (OpenClaw made 53 summary calls in one long
    session). A side turn that names a session not seen yet (``X-Session-Id``), or comes before
    its key has any conversation, opens one, which the conversation list leaves out while it
    holds no main-line message.
    """
    candidates = list(
        Conversation.objects.filter(api_key=key).order_by("-last_activity_at")[:PREFIX_CANDIDATES]
    )
    if not candidates:
        return None
    candidates.sort(key=lambda conversation: conversation.closed_at is not None)
    text = "\n".join(m.get("content") or "" for m in messages)
    quoted = _quoted([c.pk for c in candidates], text)
    home = max(candidates, key=lambda conversation: quoted.get(conversation.pk, 0))
    return Conversation.objects.select_for_update().get(pk=home.pk)


@transaction.atomic
def api_turn_record(
    *,
    key: ApiKey,
    messages: list[dict[str, Any]],
    session_id: str = "",
    turn_type: str = Message.TurnType.MAIN,
) -> RecordedTurn:
    """Find or open the request's conversation and record the messages it has not seen yet."""
    conversation, path = _find_conversation(key=key, session_id=session_id, messages=messages)
    side = turn_type == Message.TurnType.SIDE
    if conversation is None and side and not session_id:
        # Recorded from a root of their own: what the model read, and nothing of the session.
        conversation, path = _side_home(key=key, messages=messages), []
    if conversation is None:
        conversation = chat_services.conversation_create(
            owner=key.owner,
            source=Conversation.Source.API,
            external_session_id=session_id,
            api_key=key,
        )
        path = []
    matched = _match(path, messages).length
    new: list[Message] = []
    if matched == len(messages):
        # Nothing new (a retry, or a regenerate of the same prompt): answer after the
        # request's last message, as a sibling of any earlier answer.
        parent = path[matched - 1]
    else:
        parent = path[matched - 1] if matched else None
        for sent in messages[matched:]:
            parent = chat_services.message_append(
                conversation=conversation,
                role=sent["role"],
                content=sent.get("content") or "",
                parent=parent,
                turn_type=turn_type,
                tool_calls=sent.get("tool_calls"),
                tool_call_id=sent.get("tool_call_id", ""),
                name=sent.get("name", ""),
                selected=not side,
            )
            new.append(parent)
    assert parent is not None
    if not side and new and new[0].role in (Message.Role.USER, Message.Role.TOOL):
        # An agent's own context alone says nothing of the answer: the user's reply, when it
        # comes, is its next state.
        if any(m.role == Message.Role.TOOL or user_words(m.content) for m in new):
            chat_services.next_state_record(answered=new[0].parent, next_state=new[0])
    return RecordedTurn(conversation=conversation, prompt_tail=parent, new_messages=new)


# --- A completion's answers ------------------------------------------------------------------


@dataclass(frozen=True)
class CompletionTurn:
    """What one chat request asks to record: who, where, and the answers' identity."""

    key: ApiKey
    chat: ChatRequest
    turn_type: str
    session_id: str
    version: PolicyVersion
    served: str
    completion_id: str
    memories: list[dict[str, Any]] = field(default_factory=list)
    """The owner's memories the answers are given (``trainer.memory_prompt``)."""


def api_completion_record(*, turn: CompletionTurn) -> tuple[RecordedTurn, list[Message]]:
    """Record the request's new messages and the answers about to stream, in one go."""
    recorded = api_turn_record(
        key=turn.key,
        messages=turn.chat.messages,
        turn_type=turn.turn_type,
        session_id=turn.session_id,
    )
    answers: list[Message] = []
    for index in range(turn.chat.n):
        # The request's parameters (tools can be megabytes) are stored once, on the first
        # answer; its siblings point to it instead of carrying a copy each.
        params = turn.chat.params if index == 0 else {"same_as": answers[0].pk}
        answer = chat_services.assistant_message_start(
            conversation=recorded.conversation,
            parent=recorded.prompt_tail,
            policy_version=turn.version,
            served_model=turn.served,
            sampling_params=params,
            memories=turn.memories,
            turn_type=turn.turn_type,
            selected=turn.turn_type == Message.TurnType.MAIN and index == 0,
        )
        answer.completion_id = turn.completion_id if index == 0 else f"{turn.completion_id}:{index}"
        answer.save(update_fields=["completion_id"])
        answers.append(answer)
    return recorded, answers


def api_completion_finish(
    *,
    answers: list[Message],
    accumulator: CompletionAccumulator,
    status: str,
    error: str,
    close: bool,
    conversation: Conversation,
) -> None:
    """Store what each answer became, and close the conversation when the client said so."""
    for index, answer in enumerate(answers):
        chat_services.assistant_message_finish(
            message=answer,
            result=accumulator.choice(index),
            prompt_token_ids=accumulator.prompt_token_ids,
            usage=accumulator.usage,
            status=status,
            error=error,
        )
    if close:
        chat_services.conversation_close(conversation=conversation)
