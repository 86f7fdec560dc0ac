"""The chat websocket through the real ASGI application (origin check, session auth, routing).

A scripted ``stream_chat`` stands in for vLLM where the test needs to control timing (Stop,
a closed page) or failures; the last test talks to the real vLLM server of the ``stack``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from tests.sockets import open_socket
from webapp.chat import services
from webapp.chat.models import Message
from webapp.frontdoor import consumers
from webapp.inference import ServingError, ServingUnavailable

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("answers_end_with_the_test"),
]


def chunk(text: str = "", *, token: int | None = None, finish: str | None = None, **extra: Any):
    choice: dict[str, Any] = {"index": 0, "delta": {"content": text} if text else {}}
    if token is not None:
        choice["token_ids"] = [token]
        choice["logprobs"] = {"content": [{"token": text, "logprob": -0.25}]}
    if finish:
        choice["finish_reason"] = finish
    return {"id": extra.pop("id", "chatcmpl-x"), "choices": [choice], **extra}


class ScriptedStream:
    """A fake ``stream_chat``: yields fixed chunks, then raises, hangs or ends."""

    def __init__(
        self, chunks: list[dict[str, Any]], *, then: Exception | None = None, hang: bool = False
    ) -> None:
        self.chunks, self.then, self.hang = chunks, then, hang
        self.calls: list[dict[str, Any]] = []

    async def __call__(
        self, messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        call = {"messages": messages, "model": model, "params": params, "closed": False}
        call |= {"adapter": adapter_path, "lineage": lineage}
        self.calls.append(call)
        try:
            for item in self.chunks:
                await asyncio.sleep(0.01)
                yield item
            if self.then is not None:
                raise self.then
            if self.hang:
                await asyncio.Event().wait()
        finally:
            call["closed"] = True


def completion(*parts: str) -> list[dict[str, Any]]:
    cid = f"chatcmpl-{uuid.uuid4().hex}"
    chunks = [chunk(id=cid, prompt_token_ids=[11, 12, 13])]
    chunks += [chunk(text, token=100 + i, id=cid) for i, text in enumerate(parts)]
    usage = {"prompt_tokens": 3, "completion_tokens": len(parts), "total_tokens": 3 + len(parts)}
    chunks.append(chunk(finish="stop", id=cid))
    chunks.append({"id": cid, "choices": [], "usage": usage})
    return chunks


async def receive_until_idle(socket: WebsocketCommunicator, timeout: float = 5) -> list[str]:
    frames: list[str] = []
    while True:
        frame = await socket.receive_from(timeout=timeout)
        frames.append(frame)
        if 'data-state="idle"' in frame:
            return frames


def deltas(frames: list[str]) -> list[str]:
    """The repaints of the streaming answer: each one is the whole text so far, as markdown."""
    return [f for f in frames if f.startswith('<div id="message-') and '-stream"' in f]


@database_sync_to_async
def messages_of(conversation) -> list[Message]:
    return list(conversation.messages.select_related("policy_version").order_by("id"))


@database_sync_to_async
def new_conversation(owner, content: str = ""):
    return services.conversation_start(owner=owner, content=content)


async def send(socket: WebsocketCommunicator, **data: Any) -> None:
    await socket.send_to(text_data=json.dumps({**data, "HEADERS": {"HX-Request": "true"}}))


async def test_the_answer_streams_as_markdown_and_is_stored_as_sampled(alice, fake_stream):
    stream = fake_stream(ScriptedStream(completion("Hel", "lo", " <b>there</b>")))
    conversation = await new_conversation(alice)
    socket, connected, _ = await open_socket(alice, conversation.pk)
    assert connected
    await send(socket, action="send", content="Hi!")
    frames = await receive_until_idle(socket)
    await socket.disconnect()

    question, reply = await messages_of(conversation)
    assert (question.role, question.content) == ("user", "Hi!")
    assert 'data-saved="1"' in frames[0] and "Hi!" in frames[0]
    # Titled by the message: the list entry and the header, beside the transcript, not in it.
    shown = re.search(r'<div id="transcript"[^>]*>.*?</article>\s*</div>', frames[0], re.S)
    assert frames[0].index(f'id="conversation-item-{conversation.pk}"') > shown.end()
    assert 'id="conversation-title-text" hx-swap-oob="true">Hi!</h1>' in frames[0]
    # The first text at once, then repaints (throttled: deltas coalesce) up to the whole answer.
    painted = [re.sub(r"<[^>]+>", "", f).strip() for f in deltas(frames)]
    assert painted[0] == "Hel" and painted[-1] == "Hello &lt;b&gt;there&lt;/b&gt;"
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(painted))
    assert all('hx-swap-oob="innerHTML"' in f and "<p>" in f for f in deltas(frames))
    assert "<b>there" not in "".join(frames)
    assert (reply.content, reply.status) == ("Hello <b>there</b>", "complete")
    assert reply.token_ids == [100, 101, 102] and reply.token_logprobs == [-0.25] * 3
    assert reply.prompt_token_ids == [11, 12, 13]
    assert reply.usage["completion_tokens"] == 3 and reply.finish_reason == "stop"
    assert reply.policy_version.label == "v0" and reply.served_model == "base"
    assert stream.calls[0]["messages"] == [{"role": "user", "content": "Hi!"}]
    assert stream.calls[0]["model"] == "base"
    assert stream.calls[0]["params"] == {"max_tokens": 512, "temperature": 0.7}
    assert f'id="thumb-up-{reply.pk}"' in frames[-1]
    assert f'id="learning-status-{reply.pk}"' in frames[-1]  # where judging's status lands


async def test_each_signed_in_user_is_answered_by_their_own_adapter(
    alice, bob, fake_stream, settings, tmp_path
):
    """User scope: alice's live adapter answers her; bob, who has none, gets the shared base."""
    from webapp.learning.models import PolicyVersion

    settings.LEARNING_SCOPE = "user"
    await database_sync_to_async(PolicyVersion.objects.get_or_create)(
        number=0, defaults={"status": "live"}
    )
    own = await database_sync_to_async(PolicyVersion.objects.create)(
        number=1, owner=alice, status="live", adapter_path=str(tmp_path)
    )
    replies, streams = {}, []
    for user in (alice, bob):
        streams.append(fake_stream(ScriptedStream(completion("Hi"))))  # a new completion id
        conversation = await new_conversation(user)
        socket, _, _ = await open_socket(user, conversation.pk)
        await send(socket, action="send", content="Hi!")
        await receive_until_idle(socket)
        await socket.disconnect()
        replies[user.username] = (await messages_of(conversation))[1]
    assert replies["alice"].policy_version_id == own.pk
    assert replies["alice"].served_model == "parley-v1"
    assert replies["bob"].policy_version.number == 0 and replies["bob"].served_model == "base"
    # Each person's requests name their lineage: it picks their home replica.
    calls = [c for stream in streams for c in stream.calls]
    assert [(c["model"], c["adapter"], c["lineage"]) for c in calls] == [
        ("parley-v1", str(tmp_path), f"user-{alice.pk}"),
        ("base", "", f"user-{bob.pk}"),
    ]


async def test_stop_cancels_the_generation_and_keeps_what_was_written(alice, fake_stream):
    stream = fake_stream(ScriptedStream(completion("One", " two")[:3], hang=True))
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="Count slowly")
    frames: list[str] = []
    while len(deltas(frames)) < 2:
        frames.append(await socket.receive_from(timeout=5))
    await send(socket, action="stop")
    frames = await receive_until_idle(socket)
    await socket.disconnect()

    _, reply = await messages_of(conversation)
    assert (reply.status, reply.content, reply.finish_reason) == ("stopped", "One two", "stop")
    assert reply.token_ids == [100, 101]
    assert stream.calls[0]["closed"], "the stream (and with it the vLLM request) was not closed"
    assert "Stopped before the end." in frames[-1]


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (ServingUnavailable("the model server at x is not answering"), "not answering right now"),
        (
            ServingError(400, "This model's maximum context length is 2048 tokens"),
            "maximum context length is 2048 tokens",
        ),
    ],
)
async def test_a_serving_failure_is_shown_with_retry_and_the_message_is_kept(
    alice, fake_stream, error, shown
):
    fake_stream(ScriptedStream([], then=error))
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="Are you there?")
    frames = await receive_until_idle(socket)
    await socket.disconnect()
    question, reply = await messages_of(conversation)
    assert question.content == "Are you there?"
    assert reply.status == "failed" and shown in reply.error
    assert shown in frames[-1] and "Retry" in frames[-1] and 'role="alert"' in frames[-1]


async def test_retry_and_regenerate_make_siblings_of_the_same_prompt(alice, fake_stream):
    fake_stream(ScriptedStream([], then=ServingUnavailable("down")))
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="Hello")
    await receive_until_idle(socket)
    question, _ = await messages_of(conversation)

    fake_stream(ScriptedStream(completion("Hi", "!")))
    await send(socket, action="generate", parent=question.pk)
    frames = await receive_until_idle(socket)
    assert 'id="transcript"' in frames[0] and "2/2" in frames[0]
    fake_stream(ScriptedStream(completion("Hey")))
    await send(socket, action="generate", parent=question.pk)
    frames = await receive_until_idle(socket)
    await socket.disconnect()
    assert "3/3" in frames[0]
    messages = await messages_of(conversation)
    answers = [m for m in messages if m.role == "assistant"]
    assert [(m.parent_id, m.status, m.content) for m in answers] == [
        (question.pk, "failed", ""),
        (question.pk, "complete", "Hi!"),
        (question.pk, "complete", "Hey"),
    ]
    assert [m.selected for m in answers] == [False, False, True]


async def test_answer_on_open_answers_only_an_unanswered_message(alice, fake_stream):
    stream = fake_stream(ScriptedStream(completion("Sure")))
    conversation = await new_conversation(alice, "Started from the front form")
    (question,) = await messages_of(conversation)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="answer", parent=question.pk)
    await receive_until_idle(socket)
    await send(socket, action="answer", parent=question.pk)
    assert await socket.receive_nothing(timeout=0.5)
    await socket.disconnect()
    assert len(stream.calls) == 1
    assert [m.content for m in await messages_of(conversation)] == [question.content, "Sure"]


async def test_a_second_message_while_answering_is_refused_not_stored(alice, fake_stream):
    fake_stream(ScriptedStream(completion("Working")[:2], hang=True))
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="First")
    frames: list[str] = []
    while not deltas(frames):
        frames.append(await socket.receive_from(timeout=5))
    await send(socket, action="send", content="Second")
    refusal = await socket.receive_from(timeout=5)
    assert "stop it first" in refusal and 'data-saved="0"' in refusal
    await send(socket, action="stop")
    await receive_until_idle(socket)
    await socket.disconnect()
    assert [m.content for m in await messages_of(conversation) if m.role == "user"] == ["First"]


async def test_generate_for_a_message_of_another_conversation_is_refused(alice, bob, fake_stream):
    stream = fake_stream(ScriptedStream(completion("x")))
    mine = await new_conversation(alice)
    theirs = await new_conversation(bob, "Bob's secret question")
    (their_question,) = await messages_of(theirs)
    socket, _, _ = await open_socket(alice, mine.pk)
    await send(socket, action="generate", parent=their_question.pk)
    refusal = await socket.receive_from(timeout=5)
    await socket.disconnect()
    assert "not in this conversation" in refusal
    assert stream.calls == []


async def test_an_edit_of_a_message_not_in_this_conversation_is_refused(alice, bob, fake_stream):
    stream = fake_stream(ScriptedStream(completion("x")))
    mine = await new_conversation(alice, "My question")
    other = await new_conversation(alice, "My other question")
    theirs = await new_conversation(bob, "Bob's secret question")
    (question,), (other_question,), (their_question,) = [
        await messages_of(conversation) for conversation in (mine, other, theirs)
    ]
    socket, _, _ = await open_socket(alice, mine.pk)
    for message_id in (other_question.pk, their_question.pk, "nope", None):
        await send(socket, action="edit", message=message_id, content="Changed")
        assert "not in this conversation" in await socket.receive_from(timeout=5)
    await send(socket, action="edit", message=question.pk, content="  ")
    assert "Type a message first." in await socket.receive_from(timeout=5)
    await socket.disconnect()
    assert stream.calls == []
    for conversation, content in ((mine, "My question"), (theirs, "Bob's secret question")):
        assert [m.content for m in await messages_of(conversation)] == [content]


async def test_an_edit_starts_a_new_branch_that_is_answered(alice, fake_stream):
    fake_stream(ScriptedStream(completion("Four")))
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="What is 2+2")
    await receive_until_idle(socket)
    stream = fake_stream(ScriptedStream(completion("Nine")))
    question, _ = await messages_of(conversation)
    await send(socket, action="edit", message=question.pk, content="What is 3*3")
    frames = await receive_until_idle(socket)
    await socket.disconnect()

    question, reply, edited, new_reply = await messages_of(conversation)
    assert (question.selected, reply.content, reply.next_state_id) == (False, "Four", edited.pk)
    assert (edited.parent_id, edited.content, edited.selected) == (None, "What is 3*3", True)
    assert (new_reply.parent_id, new_reply.content) == (edited.pk, "Nine")
    assert stream.calls[0]["messages"] == [{"role": "user", "content": "What is 3*3"}]
    transcript = next(f for f in frames if 'id="transcript"' in f)
    assert "2/2" in transcript and "What is 2+2" not in transcript
    retitled = frames[0]  # the conversation's entry in the list
    assert "What is 3*3" in retitled and 'id="transcript"' not in retitled


async def test_an_edit_refused_a_stream_is_kept_and_shown(alice, fake_stream, monkeypatch):
    stream = fake_stream(ScriptedStream(completion("x")))
    conversation = await new_conversation(alice, "What is 2+2")
    (question,) = await messages_of(conversation)
    monkeypatch.setattr(consumers.ChatConsumer, "_take_slot", fake_slot_refusal)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="edit", message=question.pk, content="What is 3*3")
    frames = await receive_until_idle(socket)
    await socket.disconnect()
    assert "Too many answers." in frames[-1] and "edit is saved" in frames[-1]
    assert 'id="transcript"' in frames[-1] and "What is 3*3" in frames[-1]
    assert [m.content for m in await messages_of(conversation)] == ["What is 2+2", "What is 3*3"]
    assert stream.calls == []


async def fake_slot_refusal(self) -> tuple[None, str]:
    return None, "Too many answers."


async def test_another_users_or_an_anonymous_socket_is_closed(alice, bob):
    conversation = await new_conversation(alice)
    for user in (bob, None):
        socket, connected, code = await open_socket(user, conversation.pk)
        assert not connected and code == consumers.CLOSE_NOT_FOUND
        await socket.disconnect()


@pytest.mark.stack
async def test_the_real_model_streams_an_answer_that_is_stored_with_its_tokens(
    alice, stack, settings
):
    settings.VLLM_BASE_URLS = [stack.vllm_url]
    settings.VLLM_API_KEY = stack.vllm_headers["Authorization"].removeprefix("Bearer ")
    settings.CHAT_MAX_TOKENS = 12
    settings.CHAT_TEMPERATURE = 0.0
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="What is the capital of France?")
    frames = await receive_until_idle(socket, timeout=120)
    await socket.disconnect()
    _, reply = await messages_of(conversation)
    assert reply.status == "complete", reply.error
    assert len(deltas(frames)) >= 2
    assert reply.content and len(reply.token_ids) == reply.usage["completion_tokens"]
    assert len(reply.token_logprobs) == len(reply.token_ids)
    assert reply.prompt_token_ids and reply.finish_reason in ("stop", "length")
