"""The only writers of conversations, messages and feedback.

Views, websocket consumers, the ``/v1`` API, admin actions and Celery tasks all call these.
Keyword-only arguments; each write is one transaction; later learning-loop work hooks in here
(feedback and next states queue judging once the transaction commits).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from webapp.account.selectors import train_consent_default_for
from webapp.chat.envelope import user_words
from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import transcript
from webapp.chat.titles import TITLE_LENGTH, title_suggestion_queue
from webapp.core.outbox import Task, enqueue, enqueue_each
from webapp.inference import ChoiceResult

if TYPE_CHECKING:
    # Only named in a signature: the answer's version comes from whoever starts it (the
    # consumer, the /v1 view), so chat's writes never depend on the learning loop.
    from webapp.learning.models import PolicyVersion


def conversation_create(
    *,
    owner: Any,
    title: str = "",
    source: str = Conversation.Source.WEB,
    external_session_id: str = "",
    api_key: Any = None,
    train_consent: bool | None = None,
) -> Conversation:
    """A conversation of ``owner``'s; ``train_consent`` None: the owner's default (Settings), so
    every way in, the browser's and /v1's, starts a conversation as its owner asked."""
    if train_consent is None:
        train_consent = train_consent_default_for(user=owner)
    return Conversation.objects.create(
        owner=owner,
        title=title.strip()[:200],
        source=source,
        external_session_id=external_session_id[:200],
        api_key=api_key,
        train_consent=train_consent,
    )


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title, conversation.title_from_user = title.strip()[:200], True
    conversation.save(update_fields=["title", "title_from_user"])
    return conversation


@transaction.atomic
def conversation_set_train_consent(*, conversation: Conversation, consent: bool) -> Conversation:
    conversation.train_consent = consent
    conversation.finalize_skip_reason = ""
    conversation.save(update_fields=["train_consent", "finalize_skip_reason"])
    # "Not used for training" was a reason to skip its answers; with consent they are judged.
    conversation.messages.exclude(judging_skip_reason="").update(judging_skip_reason="")
    return conversation


def conversation_close(*, conversation: Conversation) -> Conversation:
    if conversation.closed_at is None:
        conversation.closed_at = timezone.now()
        conversation.save(update_fields=["closed_at"])
        enqueue(Task.FINALIZE_CONVERSATION, conversation.pk)
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


def derived_title(content: str) -> str:
    """The title a user message gives an untitled conversation ("" when it has no words)."""
    title = " ".join(user_words(content).split())
    return title if len(title) <= TITLE_LENGTH else title[: TITLE_LENGTH - 1] + "…"


def _touch(conversation: Conversation) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(last_activity_at=timezone.now())


def _next_turn_index(conversation: Conversation) -> int:
    last = conversation.messages.aggregate(last=Max("turn_index"))["last"]
    return 0 if last is None else last + 1


@transaction.atomic
def message_append(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    parent: Message | None = None,
    turn_type: str = Message.TurnType.MAIN,
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str = "",
    name: str = "",
    selected: bool = True,
) -> Message:
    """Append a message after ``parent`` (the end of the transcript).

    ``selected=False`` records it on a side branch that the transcript does not follow (side
    turns such as heartbeats: kept, but never part of the main line). A side turn neither
    names the conversation nor counts as its activity: it is the agent's, not the person's.
    """
    if parent is not None and selected:
        Message.objects.filter(parent=parent).update(selected=False)
    message = Message.objects.create(
        conversation=conversation,
        parent=parent,
        selected=selected,
        role=role,
        content=content,
        tool_calls=tool_calls or None,
        tool_call_id=tool_call_id,
        name=name,
        turn_type=turn_type,
        turn_index=_next_turn_index(conversation),
        completed_at=timezone.now(),
    )
    if turn_type == Message.TurnType.SIDE:
        return message
    # The content is read only while the conversation has no title.
    if not conversation.title and role == Message.Role.USER and (title := derived_title(content)):
        conversation.title = title
        conversation.save(update_fields=["title"])
    _touch(conversation)
    return message


@transaction.atomic
def assistant_message_start(
    *,
    conversation: Conversation,
    parent: Message,
    policy_version: PolicyVersion | None,
    served_model: str,
    sampling_params: dict[str, Any],
    turn_type: str = Message.TurnType.MAIN,
    selected: bool = True,
    memories: list[dict[str, Any]] | None = None,
) -> Message:
    """A placeholder for an answer being generated; siblings at the same fork are deselected."""
    if selected:
        Message.objects.filter(parent=parent).update(selected=False)
    message = Message.objects.create(
        conversation=conversation,
        parent=parent,
        selected=selected,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        policy_version=policy_version,
        served_model=served_model,
        sampling_params=sampling_params,
        turn_type=turn_type,
        turn_index=parent.turn_index + 1,
        memories=memories or [],
    )
    if turn_type != Message.TurnType.SIDE:
        _touch(conversation)
    return message


def assistant_message_finish(
    *,
    message: Message,
    result: ChoiceResult,
    prompt_token_ids: list[int] | None,
    usage: dict[str, Any] | None,
    completion_id: str | None = None,
    status: str = Message.Status.COMPLETE,
    error: str = "",
) -> Message:
    """Record what was generated, exactly as sampled (token ids and log-probs included)."""
    message.content = result.content
    message.reasoning = result.reasoning
    message.tool_calls = result.tool_calls or None
    message.token_ids = result.token_ids or None
    message.token_logprobs = result.token_logprobs or None
    message.prompt_token_ids = prompt_token_ids
    message.finish_reason = result.finish_reason or ("stop" if status == "stopped" else "")
    message.usage = usage
    message.completion_id = completion_id or message.completion_id
    message.status = status
    message.error = error
    message.completed_at = timezone.now()
    message.save(
        update_fields=[
            "content",
            "reasoning",
            "tool_calls",
            "token_ids",
            "token_logprobs",
            "prompt_token_ids",
            "finish_reason",
            "usage",
            "completion_id",
            "status",
            "error",
            "completed_at",
        ]
    )
    title_suggestion_queue(answer=message)
    if message.memories and status == Message.Status.COMPLETE:
        enqueue(Task.DISTIL_MEMORY, message.pk)
    return message


@transaction.atomic
def message_select(*, message: Message) -> Message:
    """Show ``message`` at its fork of the transcript (sibling navigation)."""
    Message.objects.filter(conversation=message.conversation_id, parent=message.parent_id).exclude(
        pk=message.pk
    ).update(selected=False)
    Message.objects.filter(pk=message.pk).update(selected=True)
    message.selected = True
    return message


def takes_next_state(answer: Message | None) -> bool:
    """Whether a new message after ``answer`` is its next state (what the judge sees).

    Only a main-line answer that was really given has one: a side turn (a heartbeat) is no
    part of the conversation, and a failed answer never reached the user.
    """
    return (
        answer is not None
        and answer.is_assistant
        and answer.turn_type == Message.TurnType.MAIN
        and answer.status != Message.Status.FAILED
    )


def next_state_record(*, answered: Message | None, next_state: Message) -> None:
    """Link ``next_state`` to the answer it follows, where that answer takes one."""
    if answered is not None and takes_next_state(answered):
        message_link_next_state(turns=[answered], next_state=next_state)


def message_link_next_state(*, turns: Iterable[Message], next_state: Message) -> None:
    """Record that ``next_state`` is what followed each of ``turns`` in the session."""
    ids = [turn.pk for turn in turns]
    linked = list(
        Message.objects.filter(pk__in=ids, next_state__isnull=True).values_list("pk", flat=True)
    )
    Message.objects.filter(pk__in=linked).update(next_state=next_state, judging_skip_reason="")
    enqueue_each(Task.JUDGE_MESSAGE, linked)


# --- The browser chat -----------------------------------------------------------------------


def conversation_start(*, owner: Any, content: str = "") -> Conversation:
    """A conversation for the browser chat, opened with ``content`` as its first message.

    Without content the owner's newest empty web conversation is reused, so pressing "New"
    twice does not leave empty conversations behind; one whose training consent is not the
    owner's default (they changed either since) is not "new" as they asked for it.
    """
    consent = train_consent_default_for(user=owner)
    if not content.strip():
        empty = (
            Conversation.objects.filter(owner=owner, source=Conversation.Source.WEB)
            .filter(messages__isnull=True, train_consent=consent)
            .order_by("-last_activity_at")
            .first()
        )
        return empty or conversation_create(owner=owner, train_consent=consent)
    with transaction.atomic():
        conversation = conversation_create(owner=owner, train_consent=consent)
        user_message_send(conversation=conversation, content=content)
    return conversation


@transaction.atomic
def user_message_send(*, conversation: Conversation, content: str) -> Message:
    """The user's next message, after the end of the transcript.

    It is the next state of the answer it follows, where that answer takes one
    (``takes_next_state``).
    """
    entries = transcript(conversation=conversation)
    tail = entries[-1].message if entries else None
    message = message_append(
        conversation=conversation, role=Message.Role.USER, content=content, parent=tail
    )
    next_state_record(answered=tail, next_state=message)
    return message


def conversations_close_idle(*, idle_minutes: int) -> int:
    """Close every open conversation idle for ``idle_minutes``; returns how many were closed.

    Closing is what lets the learning loop treat a session's last turn (it has no next state)
    instead of losing it.
    """
    cutoff = timezone.now() - timedelta(minutes=idle_minutes)
    with transaction.atomic():
        idle = list(
            Conversation.objects.select_for_update(skip_locked=True)
            .filter(closed_at__isnull=True, last_activity_at__lt=cutoff)
            .values_list("pk", flat=True)
        )
        Conversation.objects.filter(pk__in=idle).update(closed_at=timezone.now())
        enqueue_each(Task.FINALIZE_CONVERSATION, idle)
    return len(idle)
