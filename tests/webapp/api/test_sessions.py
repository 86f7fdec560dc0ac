"""Which conversation a request belongs to, what gets recorded, and next-state links."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tests.factories import AnswerFactory
from webapp.api.keys import api_key_create
from webapp.api.sessions import api_turn_record
from webapp.chat import services
from webapp.chat.models import Conversation, Message
from webapp.inference import ChoiceResult
from webapp.learning.selectors import policy_version_live

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture
def key(alice):
    return api_key_create(owner=alice, name="t")[0]


def _answer(turn, text: str) -> Message:
    return AnswerFactory(
        parent=turn.prompt_tail,
        content=text,
        served_model="base",
        sampling_params={},
        prompt_token_ids=[5, 6],
        usage=None,
    )


SYSTEM = {"role": "system", "content": "You are helpful. Time: 10:00"}


def test_a_session_id_keeps_one_conversation_and_records_only_new_messages(key) -> None:
    first = api_turn_record(
        key=key, session_id="s1", messages=[SYSTEM, {"role": "user", "content": "hi"}]
    )
    answer = _answer(first, "hello!")
    second = api_turn_record(
        key=key,
        session_id="s1",
        messages=[
            {"role": "system", "content": "You are helpful. Time: 10:05"},  # agents rewrite it
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello!"},
            {"role": "user", "content": "and now?"},
        ],
    )
    assert second.conversation == first.conversation
    assert [m.content for m in second.new_messages] == ["and now?"]
    assert second.new_messages[0].parent == answer
    answer.refresh_from_db()
    assert answer.next_state == second.new_messages[0]
    assert Conversation.objects.count() == 1


def test_without_an_id_the_conversation_whose_messages_are_a_prefix_is_found(key) -> None:
    first = api_turn_record(key=key, messages=[{"role": "user", "content": "q1"}])
    _answer(first, "a1")
    other = api_turn_record(key=key, messages=[{"role": "user", "content": "unrelated"}])
    follow = api_turn_record(
        key=key,
        messages=[
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
        ],
    )
    assert follow.conversation == first.conversation != other.conversation


def test_an_agents_retried_turn_stays_in_its_conversation_as_a_sibling(key) -> None:
    """OpenClaw sends no session id and, after an answer it cannot use (a malformed tool
    call), sends the same request again: the retry is the same conversation, its answer a
    sibling of the unusable one."""
    history = [
        {"role": "system", "content": "You are OpenClaw."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "read hello.txt"},
    ]
    first = api_turn_record(key=key, messages=[history[0], history[1]])
    _answer(first, "a1")
    turn = api_turn_record(key=key, messages=history)
    unusable = _answer(turn, "")
    retry = api_turn_record(key=key, messages=history)
    assert retry.conversation == first.conversation and retry.new_messages == []
    assert retry.prompt_tail == turn.prompt_tail == unusable.parent
    # A request of the first turn alone, with no earlier answer, is still a new conversation.
    fresh = api_turn_record(key=key, messages=history[:2])
    assert fresh.conversation != first.conversation


def test_an_agents_reworked_copy_of_an_answer_still_continues_its_conversation(key) -> None:
    """Agents rework an answer before sending it back (OpenClaw strips tags and turns a tool
    call written as text into a real one): the copy still stands for the answer."""
    answer_text = (
        'Sure!  <final>Here it is:</final>\n\nread({"path": "hello.txt"})\u200b\n'
        "Then I will tell you what the file says."
    )
    reworked = [
        # tags stripped, spaces collapsed, the textual call taken out
        "Sure! Here it is:\nThen I will tell you what the file says.",
        "",  # only the tool call kept
        'Sure! <final>Here it is:</final> read({"path": "hello.txt"})',
    ]
    for index, copy in enumerate(reworked):
        question = {"role": "user", "content": f"q1 {index}"}
        first = api_turn_record(key=key, messages=[SYSTEM, question])
        answer = _answer(first, answer_text)
        turn = api_turn_record(
            key=key,
            messages=[
                SYSTEM,
                question,
                {"role": "assistant", "content": copy},
                {"role": "user", "content": "q2"},
            ],
        )
        assert turn.conversation == first.conversation, copy
        assert [m.content for m in turn.new_messages] == ["q2"]
        assert turn.new_messages[0].parent == answer
    assert Conversation.objects.count() == len(reworked)


def test_an_answer_the_client_made_up_is_no_copy_and_exact_copies_win(key) -> None:
    first = api_turn_record(key=key, messages=[{"role": "user", "content": "hi"}])
    _answer(first, "Hello! How can I help you today?")
    second = api_turn_record(key=key, messages=[{"role": "user", "content": "hi"}])
    _answer(second, "Hello! How can I help you?")
    invented = api_turn_record(
        key=key,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Bonjour. Je parle français."},
            {"role": "user", "content": "q2"},
        ],
    )
    assert invented.conversation not in (first.conversation, second.conversation)
    # Both conversations hold a close copy; the one holding this exact answer is this chat,
    # though the other was active last.
    Conversation.objects.filter(pk=first.conversation.pk).update(last_activity_at=timezone.now())
    follow = api_turn_record(
        key=key,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello! How can I help you?"},
            {"role": "user", "content": "q2"},
        ],
    )
    assert follow.conversation == second.conversation


def test_an_agents_own_context_alone_is_no_next_state(key) -> None:
    first = api_turn_record(key=key, session_id="ctx", messages=[{"role": "user", "content": "q"}])
    answer = _answer(first, "a")
    context = (
        "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nActive exec sessions: none\n"
        "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"
    )
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": context},
    ]
    api_turn_record(key=key, session_id="ctx", messages=messages)
    answer.refresh_from_db()
    assert answer.next_state_id is None  # left for the user's own reply


def test_parallel_tool_results_together_are_the_next_state(key) -> None:
    turn = api_turn_record(
        key=key, session_id="tools", messages=[{"role": "user", "content": "weather?"}]
    )
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "w", "arguments": "{}"}}
        for i in (1, 2)
    ]
    answer = services.assistant_message_start(
        conversation=turn.conversation,
        parent=turn.prompt_tail,
        policy_version=policy_version_live(),
        served_model="base",
        sampling_params={},
    )
    services.assistant_message_finish(
        message=answer,
        result=ChoiceResult(content="", tool_calls=calls),
        prompt_token_ids=None,
        usage=None,
    )
    nxt = api_turn_record(
        key=key,
        session_id="tools",
        messages=[
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "c2", "content": "warm"},
        ],
    )
    assert [m.role for m in nxt.new_messages] == ["tool", "tool"]
    answer.refresh_from_db()
    assert answer.next_state == nxt.new_messages[0]
    assert nxt.new_messages[1].parent == nxt.new_messages[0]


def test_side_turns_are_recorded_off_the_main_line_and_never_link(key) -> None:
    first = api_turn_record(key=key, session_id="s", messages=[{"role": "user", "content": "hi"}])
    answer = _answer(first, "hello")
    side = api_turn_record(
        key=key,
        session_id="s",
        turn_type="side",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "HEARTBEAT"},
        ],
    )
    assert side.new_messages[0].turn_type == "side" and not side.new_messages[0].selected
    answer.refresh_from_db()
    assert answer.next_state is None
    main = api_turn_record(
        key=key,
        session_id="s",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "real reply"},
        ],
    )
    answer.refresh_from_db()
    assert answer.next_state == main.new_messages[0]


def test_an_edited_history_forks_instead_of_overwriting(key) -> None:
    first = api_turn_record(key=key, session_id="f", messages=[{"role": "user", "content": "v1"}])
    _answer(first, "answer")
    edited = api_turn_record(key=key, session_id="f", messages=[{"role": "user", "content": "v2"}])
    assert edited.new_messages[0].parent is None
    assert Message.objects.filter(conversation=first.conversation).count() == 3


def test_a_repeated_prompt_answers_as_a_sibling(key) -> None:
    first = api_turn_record(key=key, session_id="r", messages=[{"role": "user", "content": "q"}])
    _answer(first, "one")
    again = api_turn_record(key=key, session_id="r", messages=[{"role": "user", "content": "q"}])
    assert again.new_messages == [] and again.prompt_tail == first.prompt_tail


def test_a_closed_session_starts_a_new_conversation(key) -> None:
    first = api_turn_record(key=key, session_id="c", messages=[{"role": "user", "content": "q"}])
    services.conversation_close(conversation=first.conversation)
    second = api_turn_record(key=key, session_id="c", messages=[{"role": "user", "content": "q"}])
    assert second.conversation != first.conversation


def test_idle_sessions_close_so_their_last_turn_is_kept(key) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from webapp.chat.tasks import close_idle_conversations

    idle = api_turn_record(key=key, session_id="idle", messages=[{"role": "user", "content": "q"}])
    busy = api_turn_record(key=key, session_id="busy", messages=[{"role": "user", "content": "q"}])
    Conversation.objects.filter(pk=idle.conversation.pk).update(
        last_activity_at=timezone.now() - timedelta(hours=2)
    )
    assert close_idle_conversations() == 1
    idle.conversation.refresh_from_db()
    busy.conversation.refresh_from_db()
    assert idle.conversation.closed_at is not None and busy.conversation.closed_at is None
