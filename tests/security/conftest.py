"""Two users and one finished answer each (tests.factories), and no real broker."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory, UserFactory
from webapp.api.keys import api_key_create
from webapp.api.models import ApiKey
from webapp.chat.models import Conversation, Message


@pytest.fixture(autouse=True)
def no_broker(recorded_tasks):
    """Queued tasks are recorded instead of sent: these tests are about the web layer."""
    return recorded_tasks


@dataclass
class Owned:
    """One user's things: a conversation, its question and answer, an API key."""

    user: object
    conversation: Conversation
    question: Message
    answer: Message
    key: ApiKey
    secret: str


def owned(username: str, password: str) -> Owned:
    user = UserFactory(username=username, password=password)
    conversation = ConversationFactory(owner=user)
    question = QuestionFactory(conversation=conversation, content=f"{username}'s private question")
    answer = AnswerFactory(
        parent=question,
        content=f"{username}'s private answer",
        completion_id=f"chatcmpl-{username}",
        sampling_params={"max_tokens": 8},
        token_ids=[1],
        token_logprobs=[-0.1],
        prompt_token_ids=[5, 6],
        usage={"prompt_tokens": 2, "completion_tokens": 1},
    )
    key, secret = api_key_create(owner=user, name=f"{username}'s key")
    return Owned(user, conversation, question, answer, key, secret)


@pytest.fixture
def alice(db) -> Owned:
    return owned("alice", "wonderland-42")


@pytest.fixture
def bob(db) -> Owned:
    return owned("bob", "builder-4242")
