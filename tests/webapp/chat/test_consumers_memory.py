"""The browser's answers are given the person's memories: in the prompt the model reads, recorded
with the answer, and gone from the next prompt once deleted (a scripted model server)."""

from __future__ import annotations

import doctest

import pytest
from channels.db import database_sync_to_async

from tests.sockets import open_socket
from tests.webapp.chat.test_consumers import (
    ScriptedStream,
    completion,
    messages_of,
    new_conversation,
    receive_until_idle,
    send,
)
from trainer.memory_prompt import MARKER
from webapp.chat import limits
from webapp.memory import services as memory_services

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("answers_end_with_the_test"),
]


async def test_the_persons_memories_are_in_the_prompt_and_recorded_with_the_answer(
    alice, fake_stream
):
    memory = await database_sync_to_async(memory_services.memory_add)(
        owner=alice, text="Call me Sam"
    )
    stream = fake_stream(ScriptedStream(completion("Hi Sam")))
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="Hi!")
    await receive_until_idle(socket)
    assert stream.calls[0]["messages"] == [
        {"role": "user", "content": "Hi!" + MARKER + "Call me Sam."}
    ]
    question, reply = await messages_of(conversation)
    assert question.content == "Hi!"  # the conversation keeps what the person wrote
    assert reply.memories == [{"id": memory.pk, "text": "Call me Sam"}]

    await database_sync_to_async(memory_services.memory_delete)(memory=memory)
    fake_stream(stream := ScriptedStream(completion("Hi")))
    await send(socket, action="send", content="And now?")
    await receive_until_idle(socket)
    await socket.disconnect()
    assert stream.calls[0]["messages"][-1] == {"role": "user", "content": "And now?"}
    assert (await messages_of(conversation))[-1].memories == []


async def test_an_answer_with_no_room_left_in_the_window_fails_saying_why(
    alice, fake_stream, settings
):
    await database_sync_to_async(memory_services.memory_add)(owner=alice, text="Call me Sam")
    chunks = completion("Hi Sam")
    # The engine read a prompt (memories included) that leaves the answer too little room.
    chunks[0]["prompt_token_ids"] = list(range(settings.VLLM_MAX_MODEL_LEN - 20))
    stream = fake_stream(ScriptedStream(chunks))
    conversation = await new_conversation(alice)
    socket, _, _ = await open_socket(alice, conversation.pk)
    await send(socket, action="send", content="Hi!")
    frames = await receive_until_idle(socket)
    await socket.disconnect()
    question, reply = await messages_of(conversation)
    assert question.content == "Hi!"  # the message is kept
    assert reply.status == "failed" and reply.content == ""
    assert "no longer fits what the model can read" in reply.error
    assert "with your memory" in reply.error and "pause some memories" in reply.error
    assert any("no longer fits" in frame for frame in frames)
    assert stream.calls[0]["closed"]  # the engine's stream was closed: it stops writing


def test_the_room_rules_doctests_hold() -> None:
    assert doctest.testmod(limits).failed == 0
