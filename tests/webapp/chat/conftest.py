"""Conversations and answers for the chat tests, made through the services (tests.factories)."""

from __future__ import annotations

import pytest

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory
from webapp.chat.models import Conversation, Message


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
async def answers_end_with_the_test():
    """Answers are written apart from the page that asked: each test gets a channel layer of its
    own event loop (channels-redis keeps locks bound to the loop that first waited on them) and
    waits for its answers to be stored, and for the layer's tidying after each receive, so none
    outlives the test's loop."""
    import asyncio

    from channels.layers import channel_layers, get_channel_layer

    from webapp.frontdoor import generations

    channel_layers.backends.pop("default", None)
    yield
    await asyncio.wait_for(
        asyncio.gather(*generations.running(), return_exceptions=True), timeout=10
    )
    cleaners = list(getattr(get_channel_layer(), "receive_cleaners", []))
    await asyncio.wait_for(asyncio.gather(*cleaners, return_exceptions=True), timeout=5)
