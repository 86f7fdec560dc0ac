"""The browser chat asks the model for answers at the person's own temperature and length
(Settings), a first answer and a regenerated one alike; a person who chose nothing gets the
site's defaults."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from tests.sockets import open_socket
from tests.webapp.chat.test_consumers import (
    completion,
    messages_of,
    new_conversation,
    receive_until_idle,
    send,
)
from webapp.account.services import account_settings_update
from webapp.frontdoor import consumers

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("answers_end_with_the_test"),
]


class RecordingModel:
    """A fake ``stream_chat`` that answers "Sure." each time and records what it was asked."""

    def __init__(self) -> None:
        self.params: list[dict[str, Any] | None] = []

    async def __call__(self, messages: list[dict[str, Any]], *, model: str, params=None, **_: Any):
        self.params.append(params)
        for item in completion("Sure", "."):
            yield item


@pytest.fixture
def stream(monkeypatch) -> RecordingModel:
    recorder = RecordingModel()
    monkeypatch.setattr(consumers, "stream_chat", recorder)
    return recorder


async def test_answers_are_asked_for_at_the_persons_temperature_and_length(alice, stream) -> None:
    await database_sync_to_async(account_settings_update)(
        user=alice, train_consent_default=True, temperature=1.3, max_tokens=1024
    )
    conversation = await new_conversation(alice)
    socket, connected, _ = await open_socket(alice, conversation.pk)
    assert connected
    await send(socket, action="send", content="Tell me a story")
    await receive_until_idle(socket)
    question, first = await messages_of(conversation)
    await send(socket, action="generate", parent=question.pk)
    await receive_until_idle(socket)
    await socket.disconnect()

    chosen = {"max_tokens": 1024, "temperature": 1.3}
    assert stream.params == [chosen, chosen]
    *_, again = await messages_of(conversation)
    assert first.sampling_params == again.sampling_params == chosen  # what training reads


async def test_someone_who_chose_nothing_gets_the_sites_defaults(
    alice, bob, stream, settings
) -> None:
    settings.CHAT_TEMPERATURE, settings.CHAT_MAX_TOKENS = 0.7, 512
    await database_sync_to_async(account_settings_update)(
        user=alice, train_consent_default=True, temperature=0.1, max_tokens=128
    )
    conversation = await new_conversation(bob)
    socket, _, _ = await open_socket(bob, conversation.pk)
    await send(socket, action="send", content="Hi")
    await receive_until_idle(socket)
    await socket.disconnect()
    assert stream.params == [{"max_tokens": 512, "temperature": 0.7}]
