"""Conversations and answers for the chat tests, made through the services (tests.factories)."""

from __future__ import annotations

import pytest

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory
from webapp.chat.models import Conversation, Message
from webapp.frontdoor import consumers


def answer(
    conversation: Conversation,
    parent: Message,
    content: str = "An answer.",
    status: str = "complete",
) -> Message:
    """A finished assistant answer to ``parent``, as the consumer records one."""
    assert parent.conversation_id == conversation.pk
    return AnswerFactory(parent=parent, content=content, status=status)


@pytest.fixture
def chat(alice):
    """Alice's conversation: one question and its answer."""
    question = QuestionFactory(conversation=ConversationFactory(owner=alice))
    reply = AnswerFactory(parent=question, content="It is **4**.")
    return question.conversation, question, reply


@pytest.fixture
def fake_stream(monkeypatch):
    """Installs a fake ``stream_chat`` (``test_consumers.ScriptedStream``) for the consumer."""

    def install(stream):
        monkeypatch.setattr(consumers, "stream_chat", stream)
        return stream

    return install
