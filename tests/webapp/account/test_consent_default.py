"""The training default in Settings is where every new conversation starts, from the browser
and from /v1 alike; each conversation's own switch still changes it alone. The settings go
with the account when it is deleted."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient, Client

from tests.webapp.api.openai_format import BODY, post_json, scripted_chunks
from webapp.account.models import AccountSettings
from webapp.account.services import account_settings_update
from webapp.api.keys import api_key_create
from webapp.chat.models import Conversation

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def training_off(user) -> None:
    account_settings_update(user=user, train_consent_default=False, temperature=0.7, max_tokens=512)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_conversation_started_in_the_browser_follows_the_persons_default(alice, bob) -> None:
    training_off(alice)
    signed_in(alice).post("/chat/new/", {"content": "Plan my week"})
    signed_in(bob).post("/chat/new/", {"content": "Plan my week"})
    assert Conversation.objects.get(owner=alice).train_consent is False
    assert Conversation.objects.get(owner=bob).train_consent is True


def test_its_own_switch_still_turns_training_back_on_for_that_conversation(alice) -> None:
    training_off(alice)
    client = signed_in(alice)
    client.post("/chat/new/", {"content": "Plan my week"})
    conversation = Conversation.objects.get(owner=alice)
    client.post(f"/chat/{conversation.pk}/consent/", {"train_consent": "on"})
    conversation.refresh_from_db()
    assert conversation.train_consent is True
    assert AccountSettings.objects.get(user=alice).train_consent_default is False


def test_new_does_not_hand_back_an_empty_conversation_started_under_the_old_default(
    alice,
) -> None:
    client = signed_in(alice)
    client.post("/chat/new/")
    before = Conversation.objects.get(owner=alice)
    assert before.train_consent is True
    training_off(alice)
    client.post("/chat/new/")
    client.post("/chat/new/")  # and pressed twice, still one new one
    after = Conversation.objects.filter(owner=alice).exclude(pk=before.pk).get()
    assert after.train_consent is False


@pytest.fixture
async def scripted_model(monkeypatch):
    """A model server that answers every /v1 request the same; the ORM's worker-thread
    connections are closed after, so the test database can be dropped."""

    async def fake_stream(messages, *, model, params=None, base_url=None, **_: object):
        for chunk in scripted_chunks("Hello there friend"):
            yield chunk

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    yield
    await sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
async def test_a_conversation_opened_through_v1_follows_its_owners_default(
    alice, bob, scripted_model
) -> None:
    await sync_to_async(training_off)(alice)
    for owner in (alice, bob):
        _, secret = await sync_to_async(api_key_create)(owner=owner, name="agent")
        response = await post_json(AsyncClient(), "/v1/chat/completions", BODY, secret)
        assert response.status_code == 200, response.content
        assert json.loads(response.content)["choices"][0]["message"]["content"]
    consent = await sync_to_async(dict)(
        Conversation.objects.values_list("owner__username", "train_consent")
    )
    assert consent == {"alice": False, "bob": True}


def test_deleting_the_account_in_the_admin_deletes_its_settings(alice, django_user_model) -> None:
    training_off(alice)
    admin = django_user_model.objects.create_superuser("root", password="root-pass-4242")
    client = signed_in(admin)
    response = client.post(f"/admin/auth/user/{alice.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not django_user_model.objects.filter(username="alice").exists()
    assert not AccountSettings.objects.exists()
