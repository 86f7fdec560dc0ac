"""Users, conversations and answers for the chat tests, made through the services."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from webapp.chat import services
from webapp.chat.models import Conversation, Message
from webapp.inference import ChoiceResult
from webapp.learning.selectors import policy_version_live


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="wonderland-42")


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", password="builder-4242")


def answer(
    conversation: Conversation,
    parent: Message,
    content: str = "An answer.",
    status: str = "complete",
) -> Message:
    """A finished assistant answer to ``parent``, as the consumer records one."""
    version = policy_version_live()
    message = services.assistant_message_start(
        conversation=conversation,
        parent=parent,
        policy_version=version,
        served_model=version.served_name("parley"),
        sampling_params={"max_tokens": 8, "temperature": 0.7},
    )
    return services.assistant_message_finish(
        message=message,
        result=ChoiceResult(content=content, token_ids=[1, 2], token_logprobs=[-0.1, -0.2]),
        prompt_token_ids=[5, 6, 7],
        usage={"prompt_tokens": 3, "completion_tokens": 2},
        status=status,
    )


@pytest.fixture
def chat(alice):
    """Alice's conversation: one question and its answer."""
    conversation = services.conversation_create(owner=alice)
    question = services.user_message_send(conversation=conversation, content="What is 2+2?")
    reply = answer(conversation, question, "It is **4**.")
    return conversation, question, reply
