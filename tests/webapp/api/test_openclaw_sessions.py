"""An OpenClaw session through /v1, with the messages OpenClaw really sends: its housekeeping
calls are side turns of the session's conversation (never a conversation of their own, never
judged), and its rewrites of the first message keep the session one conversation."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from tests.webapp.api import openclaw_texts as oc
from tests.webapp.api.openai_format import post_json
from webapp.chat import feedback
from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import conversation_list_for_user, transcript
from webapp.learning.models import Judgement, Sample
from webapp.learning.workflows.judging import judge_message
from webapp.memory.services import memory_add

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("close_worker_thread_connections", "scripted", "recorded_tasks"),
]

ANSWER = "Hello there friend"  # what the scripted model server answers


def _sys(content: str) -> dict:
    return {"role": "system", "content": content}


def _user(content: str) -> dict:
    return {"role": "user", "content": content}


def _answer(content: str = ANSWER) -> dict:
    return {"role": "assistant", "content": content}


async def _send(secret: str, messages: list[dict], **headers: str) -> Message:
    """Post a chat request as OpenClaw does (no session header); its answer, as recorded."""
    body = {"model": "parley", "messages": messages}
    response = await post_json(AsyncClient(), "/v1/chat/completions", body, secret, **headers)
    assert response.status_code == 200, response.content
    completion = json.loads(response.content)["id"]
    return await sync_to_async(Message.objects.select_related("conversation").get)(
        completion_id=completion
    )


def _main_line(conversation: Conversation) -> list[Message]:
    return [entry.message for entry in transcript(conversation=conversation)]


class NeverAsked:
    """A judge that must not be needed."""

    model = "never"

    def complete(self, messages: list[dict], n: int, choices=None) -> list[str]:
        raise AssertionError("a side turn was sent to the judge")


FRANCE = [_sys(oc.SYSTEM), _user(oc.FIRST)]
SPAIN = [
    _sys(oc.SYSTEM),
    _user(oc.FIRST.replace("France", "Spain").replace("cap1", "cap2")),
]
SHORTER = _user(f"{oc.STAMP} No, shorter please, and call me Sam")


async def test_a_summary_call_is_a_side_turn_of_the_session_it_summarises(
    secret, recorded_tasks
) -> None:
    france = await _send(secret, FRANCE)
    await sync_to_async(memory_add)(owner=france.conversation.owner_id, text="Call me Sam")
    france_two = await _send(secret, [*FRANCE, _answer(), SHORTER])
    await _send(secret, SPAIN)  # another session of the same key, active last
    before = await sync_to_async(Conversation.objects.get)(pk=france.conversation_id)
    recorded_tasks.clear()

    summary = await _send(secret, [_sys(oc.SUMMARY_SYSTEM), _user(oc.SUMMARY_USER)])

    def check() -> None:
        assert Conversation.objects.count() == 2  # no conversation of its own
        assert summary.conversation_id == france.conversation_id
        stored = list(summary.conversation.messages.filter(turn_type="side"))
        assert [m.role for m in stored] == ["system", "user", "assistant"]
        assert stored[1].content == oc.SUMMARY_USER and stored[2] == summary
        assert not any(m.selected for m in stored) and stored[0].parent is None
        # The person's memories go with their own turns, not with the agent's housekeeping.
        assert [m["text"] for m in france_two.memories] == ["Call me Sam"]
        assert summary.memories == []
        assert _main_line(summary.conversation)[-1] == france_two  # the main line is intact
        france_two.refresh_from_db()
        assert france_two.next_state is None
        owner = summary.conversation.owner
        assert conversation_list_for_user(user=owner).count() == 2
        # It names nothing and moves nothing up the person's list.
        summary.conversation.refresh_from_db()
        assert summary.conversation.title == before.title
        assert summary.conversation.last_activity_at == before.last_activity_at
        # Never judged nor trained, even with a 👍 on it.
        assert not [task for task in recorded_tasks if "judge" in task[0]]
        feedback.feedback_set(message=summary, author=owner, rating=1)
        assert judge_message(summary.pk, judge=NeverAsked()) is None
        assert not Judgement.objects.filter(message=summary).exists()
        assert not Sample.objects.filter(message=summary).exists()

    await sync_to_async(check)()


async def test_a_session_whose_runtime_line_changes_stays_one_conversation(secret) -> None:
    """OpenClaw adds ``repo=…/workspace`` to the runtime line in the first user message once a
    workspace exists, and its system prompt gains a section and a new date: the answer before
    the change still gets the user's next message as its next state."""
    first = await _send(secret, FRANCE)
    rewritten = [_sys(oc.SYSTEM_LATER), _user(oc.FIRST_WITH_WORKSPACE), _answer(), SHORTER]
    second = await _send(secret, rewritten)

    def check() -> None:
        assert Conversation.objects.count() == 1
        assert second.conversation_id == first.conversation_id
        first.refresh_from_db()
        assert first.next_state is not None and first.next_state.content == SHORTER["content"]
        assert second.parent == first.next_state

    await sync_to_async(check)()


async def test_a_memory_flush_is_a_side_turn_and_the_session_goes_on(secret) -> None:
    """The flush resends the session's history under a runtime line of its own; the next turn
    continues the main line after it, in the same conversation."""
    first = await _send(secret, FRANCE)
    second = await _send(secret, [*FRANCE, _answer(), SHORTER])
    history = [_user(oc.FIRST_IN_MEMORY_FLUSH), _answer(), SHORTER, _answer()]
    flush = await _send(
        secret, [_sys(oc.MEMORY_FLUSH_SYSTEM), *history, _user(oc.MEMORY_FLUSH_USER)]
    )
    thanks = _user(f"{oc.STAMP} Thanks!")
    third = await _send(secret, [*FRANCE, _answer(), SHORTER, _answer(), thanks])

    def check() -> None:
        assert Conversation.objects.count() == 1
        assert flush.conversation_id == third.conversation_id == first.conversation_id
        assert flush.turn_type == "side" and flush.parent.content == oc.MEMORY_FLUSH_USER
        assert flush.parent.parent == second  # after the session's last answer, beside it
        second.refresh_from_db()
        assert second.next_state == third.parent and third.parent.content == thanks["content"]
        assert _main_line(third.conversation)[-2:] == [third.parent, third]

    await sync_to_async(check)()


async def test_a_housekeeping_call_before_any_conversation_stays_out_of_the_list(
    secret,
) -> None:
    heartbeat = await _send(secret, [_sys(oc.SYSTEM), _user(f"{oc.STAMP} {oc.HEARTBEAT}")])

    def hidden() -> None:
        assert heartbeat.turn_type == "side"
        owner = heartbeat.conversation.owner
        assert not conversation_list_for_user(user=owner).exists()
        assert _main_line(heartbeat.conversation) == []

    await sync_to_async(hidden)()
    first = await _send(secret, FRANCE)

    def listed() -> None:
        listed = list(conversation_list_for_user(user=first.conversation.owner))
        assert listed == [first.conversation] != [heartbeat.conversation]

    await sync_to_async(listed)()


async def test_a_clients_turn_type_header_decides_over_the_text(secret) -> None:
    summary = [_sys(oc.SUMMARY_SYSTEM), _user(oc.SUMMARY_USER)]
    unmarked = await _send(secret, summary)
    asked_main = await _send(secret, summary, X_Turn_Type="main")
    asked_side = await _send(secret, [_sys(oc.SYSTEM), _user("hi")], X_Turn_Type="side")
    turn_types = (unmarked.turn_type, asked_main.turn_type, asked_side.turn_type)
    assert turn_types == ("side", "main", "side")
