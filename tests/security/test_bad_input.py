"""Bad input gets a clear 4xx and leaves nothing half stored: oversized bodies, invalid
UTF-8, NUL characters, huge comments, and websocket frames that are not what the page sends."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, Client
from django.urls import reverse

from tests.sockets import connected_socket
from webapp.asgi import application
from webapp.chat.feedback_spec import FIELDS, MAX_FEEDBACK_TEXT
from webapp.chat.models import Feedback, Message
from webapp.frontdoor import consumers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

CHAT = {"model": "parley", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def no_model(monkeypatch):
    """The model must never be asked: every request here is refused before that."""

    async def refuse(*args, **kwargs):
        raise AssertionError("the model server was called for a bad request")
        yield  # pragma: no cover - makes this an async generator

    monkeypatch.setattr("webapp.api.completions.stream_chat", refuse)
    monkeypatch.setattr(consumers, "stream_chat", refuse)


def _api(secret: str, path: str, data: bytes | str, **extra):
    return AsyncClient().post(
        path,
        data=data,
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
        **extra,
    )


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    return json.loads(response.content)["error"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/feedback"])
async def test_a_body_over_the_limit_is_413_and_nothing_is_stored(
    path, alice, settings, no_model
) -> None:
    settings.API_MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    big = json.dumps({**CHAT, "completion_id": alice.answer.completion_id, "comment": "x" * 20_000})
    error = _error(await _api(alice.secret, path, big), 413)
    assert error["code"] == "body_too_large"
    assert await Message.objects.acount() == 2
    assert not await Feedback.objects.aexists()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/feedback"])
async def test_invalid_utf8_is_400(path, alice, no_model) -> None:
    body = b'{"model": "parley", "completion_id": "\xff\xfe", "messages": []}'
    error = _error(await _api(alice.secret, path, body), 400)
    assert "UTF-8" in error["message"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/feedback"])
@pytest.mark.parametrize(
    "body", ["[" * 100_000, "[]", "{", "null"], ids=["deep", "list", "cut", "null"]
)
async def test_json_that_is_not_one_object_is_400(path, body, alice, no_model) -> None:
    _error(await _api(alice.secret, path, body), 400)


@pytest.mark.parametrize(
    "message",
    [
        {"role": ["user"], "content": "hi"},
        {"role": {"x": 1}, "content": "hi"},
        {"role": "user", "content": [{"type": {}, "text": "hi"}]},
        {"role": "user", "content": [{"type": ["text"], "text": "hi"}]},
    ],
    ids=["role-list", "role-object", "part-type-object", "part-type-list"],
)
async def test_unhashable_values_where_names_belong_are_400(message, alice, no_model) -> None:
    # Found by schemathesis: a set lookup on a JSON object raised TypeError, a 500.
    body = json.dumps({**CHAT, "messages": [message]})
    _error(await _api(alice.secret, "/v1/chat/completions", body), 400)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "a\u0000b"}]}),
        ("/v1/chat/completions", {**CHAT, "user": "nul\u0000user"}),
        ("/v1/feedback", {"completion_id": "chatcmpl-alice", "comment": "bad\u0000comment"}),
    ],
    ids=["message", "user-field", "comment"],
)
async def test_nul_characters_are_a_clear_400_not_a_storage_failure(
    path, body, alice, no_model
) -> None:
    # PostgreSQL cannot store U+0000 in text or jsonb; it must be refused before anything is.
    error = _error(await _api(alice.secret, path, json.dumps(body)), 400)
    assert "NUL" in error["message"]
    assert await Message.objects.acount() == 2
    assert not await Feedback.objects.aexists()


async def test_a_huge_comment_on_the_api_is_400_and_the_rating_is_not_stored(alice) -> None:
    body = {
        "completion_id": alice.answer.completion_id,
        "rating": 1,
        "comment": "y" * (MAX_FEEDBACK_TEXT + 1),
    }
    error = _error(await _api(alice.secret, "/v1/feedback", json.dumps(body)), 400)
    assert str(MAX_FEEDBACK_TEXT) in error["message"]
    assert not await Feedback.objects.aexists()


@pytest.mark.parametrize("field", [f.name for f in FIELDS if not f.choices])
def test_a_huge_comment_on_the_page_is_400_with_the_reason_and_nothing_stored(
    client, alice, field
) -> None:
    client.force_login(alice.user)
    url = reverse("chat:feedback", args=[alice.answer.pk])
    response = client.post(url, {field: "z" * (MAX_FEEDBACK_TEXT + 1)})
    assert response.status_code == 400
    assert f"at most {MAX_FEEDBACK_TEXT:,}".replace(",", "") in response.content.decode().replace(
        ",", ""
    )
    assert not Feedback.objects.exists()


def test_a_web_body_over_the_upload_limit_is_400_and_nothing_stored(client, alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    client.force_login(alice.user)
    url = reverse("chat:feedback", args=[alice.answer.pk])
    response = client.post(url, {"comment": "w" * 20_000, "rating": "1"})
    assert response.status_code == 400
    assert not Feedback.objects.exists()


def test_invalid_utf8_and_nul_in_web_forms_never_reach_the_database(client, alice) -> None:
    client.force_login(alice.user)
    url = reverse("chat:feedback", args=[alice.answer.pk])
    response = client.post(
        url, b"comment=caf%E9%FF", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code in (200, 302)
    assert Feedback.objects.get().comment == "caf\ufffd\ufffd"  # replaced, still valid text
    response = client.post(url, {"comment": "nul\x00byte"})
    assert response.status_code == 400
    assert Feedback.objects.get().comment == "caf\ufffd\ufffd"
    response = client.post(reverse("chat:new"), {"content": "nul\x00byte"})
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("frame", "reply"),
    [
        ({"text_data": "not json at all"}, "not understood"),
        ({"text_data": "[1, 2, 3]"}, "not understood"),
        ({"text_data": '"send"'}, "not understood"),
        ({"text_data": "[" * 100_000}, "not understood"),
        ({"bytes_data": b"\xff\xfe\x00binary"}, "not understood"),
        ({"text_data": json.dumps({"action": "launch"})}, "not understood"),
        ({"text_data": json.dumps({"action": "send", "content": "x" * 60_000})}, "limited to"),
        ({"text_data": json.dumps({"action": "send", "content": "x" * 5_000_000})}, "limited to"),
        ({"text_data": json.dumps({"action": "send", "content": "a\u0000b"})}, "NUL"),
        ({"text_data": json.dumps({"action": "send", "content": ["list"]})}, "Type a message"),
        ({"text_data": json.dumps({"action": "generate", "parent": 10**30})}, "not in this"),
        ({"text_data": json.dumps({"action": "generate", "parent": {"x": 1}})}, "not in this"),
    ],
    ids=[
        "not-json",
        "json-list",
        "json-string",
        "deeply-nested",
        "binary",
        "unknown-action",
        "too-long",
        "five-megabytes",
        "nul",
        "content-not-text",
        "huge-id",
        "id-not-a-number",
    ],
)
@pytest.mark.usefixtures("answers_end_with_the_test")
async def test_bad_websocket_frames_get_an_error_and_the_socket_stays_usable(
    alice, frame, reply, no_model
) -> None:
    socket = await connected_socket(alice.user, alice.conversation.pk)
    await socket.send_to(**frame)
    answer = await socket.receive_from(timeout=10)
    assert reply in answer and 'data-state="idle"' in answer
    assert await socket.receive_nothing(timeout=0.2)
    # Still open and still answering: a stop needs no model and changes nothing.
    await socket.send_to(text_data="also not json")
    assert "not understood" in await socket.receive_from(timeout=5)
    await socket.disconnect()
    assert await Message.objects.filter(conversation=alice.conversation).acount() == 2


@pytest.mark.parametrize(
    "origin", [b"http://evil.example", b"https://testserver.evil.example", b"null"]
)
async def test_a_websocket_from_a_foreign_origin_is_refused(alice, origin) -> None:
    client = Client()
    await database_sync_to_async(client.force_login)(alice.user)
    headers = [
        (b"host", b"testserver"),
        (b"origin", origin),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    socket = WebsocketCommunicator(
        application, f"/ws/chat/{alice.conversation.pk}/", headers=headers
    )
    connected, _ = await socket.connect()
    assert not connected
    # Even a refused socket's application task must be told the client left, or it lingers.
    await socket.disconnect()
