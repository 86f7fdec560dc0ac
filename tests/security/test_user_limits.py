"""Per-user limits: API keys, concurrent streams (websocket and /v1 together), requests a
minute over all of a user's keys (issue 17, "Resource abuse")."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from tests.factories import UserFactory
from webapp.api.keys import ApiKeyLimitReached, api_key_create, api_key_revoke


@pytest.mark.django_db
def test_a_user_gets_a_clear_error_past_the_key_limit_and_revoked_keys_do_not_count(
    settings,
) -> None:
    settings.USER_MAX_API_KEYS = 2
    user = UserFactory(username="hoarder")
    first, _ = api_key_create(owner=user)
    api_key_create(owner=user)
    with pytest.raises(ApiKeyLimitReached, match="2 active API keys"):
        api_key_create(owner=user)
    api_key_revoke(key=first)
    api_key_create(owner=user)  # a revoked key frees its place
    assert user.api_keys.count() == 3


@pytest.mark.django_db
def test_the_keys_page_shows_the_limit_instead_of_a_new_key(client, settings) -> None:
    settings.USER_MAX_API_KEYS = 1
    user = UserFactory(username="hoarder")
    client.force_login(user)
    assert b"new-api-key" in client.post("/settings/api-keys/", {"name": "one"}).content
    response = client.post("/settings/api-keys/", {"name": "two"})
    assert response.status_code == 200
    assert b"new-api-key" not in response.content
    assert b"1 active API key" in response.content
    assert user.api_keys.count() == 1


@pytest.mark.django_db
def test_the_management_command_refuses_past_the_key_limit(settings) -> None:
    settings.USER_MAX_API_KEYS = 1
    UserFactory(username="scripted")
    call_command("create_api_key", "--user", "scripted")
    with pytest.raises(CommandError, match="1 active API key"):
        call_command("create_api_key", "--user", "scripted")


# --- Streams and requests a minute, over every key and the websocket ------------------------


def _chunks(text: str) -> list[dict]:
    return [
        {"id": "x", "created": 1, "choices": [{"index": 0, "delta": {"content": text}}]},
        {"id": "x", "created": 1, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]


@pytest.fixture
def limits_clean(settings):
    """Counters of earlier tests (user ids restart with each test database) are forgotten."""
    import redis

    broker = redis.Redis.from_url(settings.REDIS_URL)
    for pattern in ("parley:ratelimit:*", "parley:streams:*"):
        for name in broker.scan_iter(pattern):
            broker.delete(name)
    settings.API_RATE_LIMIT_PER_MINUTE = 100
    settings.USER_RATE_LIMIT_PER_MINUTE = 100
    settings.USER_MAX_STREAMS = 100
    yield
    from django.db import connections

    connections.close_all()


@pytest.fixture
def model(monkeypatch):
    """A scripted model server for both front doors."""
    from webapp.frontdoor import consumers

    async def fake_stream(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        for chunk in _chunks("fine"):
            yield chunk

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    monkeypatch.setattr(consumers, "stream_chat", fake_stream)


async def _post(secret: str, *, stream: bool = False):
    import json

    from django.test import AsyncClient

    body = {"model": "parley", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    return await AsyncClient().post(
        "/v1/chat/completions",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


def _error(response, status: int) -> dict:
    import json

    assert response.status_code == status, response.content
    error = json.loads(response.content)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


async def _drain(response) -> str:
    return "".join([part.decode() async for part in response.streaming_content])


async def _two_keys(username: str) -> tuple[object, str, str]:
    from asgiref.sync import sync_to_async

    user = await sync_to_async(UserFactory)(username=username)
    first = (await sync_to_async(api_key_create)(owner=user))[1]
    second = (await sync_to_async(api_key_create)(owner=user))[1]
    return user, first, second


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
async def test_concurrent_streams_are_limited_per_user_across_keys(settings, limits_clean, model):
    settings.USER_MAX_STREAMS = 1
    _, first, second = await _two_keys("streamer")
    open_stream = await _post(first, stream=True)  # not read yet: still being written
    assert open_stream.status_code == 200
    error = _error(await _post(second), 429)
    assert error["code"] == "too_many_streams" and error["type"] == "rate_limit_error"
    assert "data: [DONE]" in await _drain(open_stream)  # the stream ends: its slot is free
    assert (await _post(second)).status_code == 200
    assert (await _post(second)).status_code == 200  # a whole answer frees its slot too


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
async def test_a_slot_a_crashed_process_held_expires(settings, limits_clean) -> None:
    import asyncio

    from webapp.core.limits import stream_slot_acquire

    settings.USER_MAX_STREAMS = 1
    settings.STREAM_SLOT_TTL_S = 1
    assert await stream_slot_acquire(user_id=4242) is not None  # never released
    assert await stream_slot_acquire(user_id=4242) is None
    await asyncio.sleep(1.2)
    assert await stream_slot_acquire(user_id=4242) is not None


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
async def test_requests_a_minute_are_limited_per_user_across_keys(settings, limits_clean, model):
    settings.USER_RATE_LIMIT_PER_MINUTE = 2
    _, first, second = await _two_keys("hammer")
    assert (await _post(first)).status_code == 200
    assert (await _post(second)).status_code == 200
    response = await _post(first)
    error = _error(response, 429)
    assert error["code"] == "rate_limit_exceeded" and "account" in error["message"]
    assert int(response["Retry-After"]) >= 1


async def _socket_for(user):
    from channels.db import database_sync_to_async

    from tests.sockets import connected_socket
    from webapp.chat import services

    conversation = await database_sync_to_async(services.conversation_start)(owner=user)
    return conversation, await connected_socket(user, conversation.pk)


async def _say(socket, content: str) -> list[str]:
    import json

    await socket.send_to(text_data=json.dumps({"action": "send", "content": content}))
    frames = []
    while True:
        frame = await socket.receive_from(timeout=5)
        frames.append(frame)
        if 'data-state="idle"' in frame:
            return frames


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("answers_end_with_the_test")
async def test_a_websocket_message_past_the_stream_limit_is_kept_and_told(
    settings, limits_clean, model
):
    from channels.db import database_sync_to_async

    settings.USER_MAX_STREAMS = 1
    user, first, _ = await _two_keys("tabs")
    open_stream = await _post(first, stream=True)  # /v1 holds the user's one slot
    conversation, socket = await _socket_for(user)
    frames = await _say(socket, "Are you there?")
    assert "already being written" in frames[-1] and 'data-saved="1"' in frames[-1]
    roles = await database_sync_to_async(
        lambda: list(conversation.messages.values_list("role", "content"))
    )()
    assert roles == [("user", "Are you there?")]  # stored, and no answer was started
    await _drain(open_stream)
    frames = await _say(socket, "And now?")
    assert "already being written" not in "".join(frames)
    # The websocket's answer holds the slot while it is written, and frees it after.
    assert (await _post(first)).status_code == 200
    await socket.disconnect()


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("answers_end_with_the_test")
async def test_websocket_messages_count_toward_the_users_requests_a_minute(
    settings, limits_clean, model
):
    settings.USER_RATE_LIMIT_PER_MINUTE = 2
    user, first, _ = await _two_keys("chatty")
    _, socket = await _socket_for(user)
    await _say(socket, "one")
    assert (await _post(first)).status_code == 200
    _error(await _post(first), 429)
    frames = await _say(socket, "three")
    assert "requests a minute" in frames[-1]
    await socket.disconnect()


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
async def test_a_users_extra_answer_waits_while_others_are_answered(settings, limits_clean) -> None:
    import asyncio
    import time

    from webapp.core.limits import stream_slot_acquire

    settings.USER_EXTRA_STREAM_WAIT_S = 10
    settings.JUDGE_YIELD_GRACE_S = 0.2
    alone = await stream_slot_acquire(user_id=1)  # nobody else: at once
    second_alone = await stream_slot_acquire(user_id=1)  # still nobody else: at once too
    await second_alone.release()
    other = await stream_slot_acquire(user_id=2)  # user 2's first answer: never waits
    assert alone is not None and other is not None

    async def release_later() -> None:
        await asyncio.sleep(0.6)
        await other.release()

    releasing = asyncio.ensure_future(release_later())
    started = time.monotonic()
    extra = await stream_slot_acquire(user_id=1)  # user 1's second while user 2 is answered
    waited = time.monotonic() - started
    await releasing
    assert extra is not None
    assert 0.6 <= waited < 3, waited  # until user 2's answer ended (and its grace), not 10 s
    for slot in (alone, extra):
        await slot.release()


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
async def test_an_extra_answer_waits_at_most_the_setting(settings, limits_clean) -> None:
    import time

    from webapp.core.limits import stream_slot_acquire

    settings.USER_EXTRA_STREAM_WAIT_S = 0.5
    busy = await stream_slot_acquire(user_id=2)
    first = await stream_slot_acquire(user_id=1)
    started = time.monotonic()
    extra = await stream_slot_acquire(user_id=1)
    assert extra is not None and 0.4 <= time.monotonic() - started < 2
    for slot in (busy, first, extra):
        await slot.release()
