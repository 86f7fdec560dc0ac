"""Two users and one finished answer each, made through the services, and no real broker."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model

from webapp.api.keys import api_key_create
from webapp.api.models import ApiKey
from webapp.chat import services
from webapp.chat.models import Conversation, Message
from webapp.inference import ChoiceResult
from webapp.learning.selectors import policy_version_live


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """Queued tasks are recorded instead of sent: these tests are about the web layer."""
    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(
        "webapp.core.outbox.send", lambda task, args: sent.append((str(task), *args))
    )
    return sent


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
    user = get_user_model().objects.create_user(username, password=password)
    conversation = services.conversation_create(owner=user)
    question = services.user_message_send(
        conversation=conversation, content=f"{username}'s private question"
    )
    version = policy_version_live()
    started = services.assistant_message_start(
        conversation=conversation,
        parent=question,
        policy_version=version,
        served_model=version.served_name("parley"),
        sampling_params={"max_tokens": 8},
    )
    started.completion_id = f"chatcmpl-{username}"
    started.save(update_fields=["completion_id"])
    answer = services.assistant_message_finish(
        message=started,
        result=ChoiceResult(
            content=f"{username}'s private answer", token_ids=[1], token_logprobs=[-0.1]
        ),
        prompt_token_ids=[5, 6],
        usage={"prompt_tokens": 2, "completion_tokens": 1},
        status="complete",
    )
    key, secret = api_key_create(owner=user, name=f"{username}'s key")
    return Owned(user, conversation, question, answer, key, secret)


@pytest.fixture
def alice(db) -> Owned:
    return owned("alice", "wonderland-42")


@pytest.fixture
def bob(db) -> Owned:
    return owned("bob", "builder-4242")
