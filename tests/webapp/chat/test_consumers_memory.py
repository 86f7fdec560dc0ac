"""The browser's answers are given the person's memories: in the prompt the model reads, recorded
with the answer, and gone from the next prompt once deleted (a scripted model server)."""

from __future__ import annotations

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
from webapp.frontdoor import consumers
from webapp.memory import services as memory_services

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("answers_end_with_the_test"),
]


@pytest.fixture
def fake_stream(monkeypatch):
    def install(stream: ScriptedStream) -> ScriptedStream:
        monkeypatch.setattr(consumers, "stream_chat", stream)
        return stream

    return install


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
