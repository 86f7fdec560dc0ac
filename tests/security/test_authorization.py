"""Nobody reaches anyone else's things: every object URL answers another user's ids with 404.

404 and not 403, so that a probe cannot even learn that the id exists. Alice is signed in
throughout; every id in these tests belongs to Bob.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from django.db import connection
from django.test import AsyncClient
from django.urls import reverse

from tests.sockets import open_socket
from webapp.api.models import ApiKey
from webapp.chat.models import Conversation, Feedback, Message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def _bob_unchanged(bob) -> None:
    conversation = Conversation.objects.get(pk=bob.conversation.pk)
    assert conversation.title == bob.conversation.title
    assert conversation.train_consent == bob.conversation.train_consent
    assert conversation.messages.count() == 2
    assert not Feedback.objects.filter(message__conversation=conversation).exists()
    assert ApiKey.objects.get(pk=bob.key.pk).revoked_at is None


def test_every_web_object_url_answers_another_users_ids_with_404(client, alice, bob) -> None:
    client.force_login(alice.user)
    conversation, answer = bob.conversation.pk, bob.answer.pk
    gets = [
        reverse("chat:conversation", args=[conversation]),
        reverse("privacy:delete", args=[conversation]),
        reverse("chat:learning_status", args=[answer]),
    ]
    posts = [
        (reverse("chat:rename", args=[conversation]), {"title": "mine now"}),
        (reverse("chat:delete", args=[conversation]), {}),
        (reverse("chat:consent", args=[conversation]), {"train_consent": "on"}),
        (reverse("chat:feedback", args=[answer]), {"rating": "1"}),
        (reverse("chat:feedback", args=[answer]), {"comment": "a comment on Bob's answer"}),
        (reverse("chat:select", args=[answer]), {}),
        (reverse("privacy:delete", args=[conversation]), {}),
        (reverse("api_key_revoke", args=[bob.key.pk]), {}),
    ]
    for url in gets:
        assert client.get(url).status_code == 404, url
    for url, data in posts:
        assert client.post(url, data).status_code == 404, url
    # The answer's id used as a conversation id, and the question's as an answer's: still 404.
    assert (
        client.post(reverse("chat:feedback", args=[bob.question.pk]), {"rating": "1"}).status_code
        == 404
    )
    assert client.get(reverse("chat:conversation", args=[10**30])).status_code == 404
    _bob_unchanged(bob)


def test_lists_searches_and_the_export_hold_only_my_things(client, alice, bob) -> None:
    client.force_login(alice.user)
    for url in (
        reverse("chat:index"),
        reverse("chat:list") + "?q=private",
        reverse("privacy:my_data"),
        reverse("api_keys"),
        reverse("mymodel:index"),
        reverse("mymodel:progress") + "?on=chat",
    ):
        page = client.get(url).content.decode()
        assert "bob" not in page.lower(), url
    export = b"".join(client.get(reverse("privacy:export")).streaming_content).decode()
    assert "alice's private answer" in export
    assert "bob" not in export.lower()


def test_dashboard_is_404_for_non_staff_and_the_admin_shows_them_only_its_login(
    client, alice, bob
) -> None:
    client.force_login(alice.user)
    for name in ("index", "panel", "data"):
        assert client.get(reverse(f"dashboard:{name}")).status_code == 404, name
    # Django's admin answers anyone who is not staff with its own login page, whatever the id.
    for url in (
        reverse("admin:chat_conversation_change", args=[bob.conversation.pk]),
        reverse("admin:chat_conversation_changelist"),
        reverse("admin:api_apikey_changelist"),
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url
    response = client.post(
        reverse("admin:api_apikey_changelist"),
        {"action": "delete_selected", "_selected_action": [bob.key.pk]},
    )
    assert response.status_code == 302
    _bob_unchanged(bob)


async def test_api_feedback_on_another_users_completion_is_404(alice, bob) -> None:
    response = await AsyncClient().post(
        "/v1/feedback",
        data=json.dumps({"completion_id": bob.answer.completion_id, "rating": -1}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice.secret}"},
    )
    assert response.status_code == 404
    assert json.loads(response.content)["error"]["code"] == "completion_not_found"
    assert not await Feedback.objects.filter(message=bob.answer).aexists()


async def test_an_api_session_id_never_joins_another_users_conversation(alice, bob, monkeypatch):
    async def fake_stream(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        yield {"id": "x", "choices": [{"index": 0, "delta": {"content": "ok"}}]}

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    await Conversation.objects.filter(pk=bob.conversation.pk).aupdate(
        source=Conversation.Source.API, external_session_id="shared-session"
    )
    response = await AsyncClient().post(
        "/v1/chat/completions",
        data=json.dumps({"model": "parley", "messages": [{"role": "user", "content": "hi"}]}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice.secret}", "X-Session-Id": "shared-session"},
    )
    assert response.status_code == 200
    mine = int(response["X-Parley-Conversation"])
    assert mine != bob.conversation.pk
    assert (await Conversation.objects.aget(pk=mine)).owner_id == alice.user.pk
    assert await Message.objects.filter(conversation_id=bob.conversation.pk).acount() == 2


async def test_the_chat_socket_refuses_another_users_conversation_and_messages(alice, bob):
    socket, connected, code = await open_socket(alice.user, bob.conversation.pk)
    assert not connected and code == 4404
    await socket.disconnect()

    socket, connected, _ = await open_socket(alice.user, alice.conversation.pk)
    assert connected
    for action in ("generate", "answer"):
        await socket.send_to(text_data=json.dumps({"action": action, "parent": bob.question.pk}))
        frame = await socket.receive_from(timeout=5)
        assert "That message is not in this conversation" in frame
    await socket.disconnect()
    assert await Message.objects.filter(conversation_id=bob.conversation.pk).acount() == 2


def test_api_keys_are_stored_only_as_hashes(alice, bob) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM api_apikey")
        rows = [" ".join(str(value) for value in row) for row in cursor.fetchall()]
    assert len(rows) == 2
    for owned in (alice, bob):
        assert not any(owned.secret in row for row in rows)
        assert not any(owned.secret[11:] in row for row in rows)  # not even the secret part
        stored = ApiKey.objects.get(pk=owned.key.pk)
        assert stored.secret_hash == hashlib.sha256(owned.secret.encode()).hexdigest()
        assert stored.prefix == owned.secret[:11]  # only the shown prefix, to tell keys apart
