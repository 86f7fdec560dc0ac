"""/v1's errors in OpenAI's format: a bad key, a bad body, an unknown model or path, too large
or too many requests, and serving or storage that cannot be reached, with a scripted model
server."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from tests.webapp.api.openai_format import BODY, assert_openai_error, post_json, scripted_chunks
from webapp.api.keys import api_key_revoke
from webapp.chat.models import Message
from webapp.inference import ServingUnavailable

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("close_worker_thread_connections"),
]


async def test_missing_bad_and_revoked_keys_are_401(secret) -> None:
    client = AsyncClient()
    assert_openai_error(await post_json(client, "/v1/chat/completions", BODY, None), 401)
    assert_openai_error(await post_json(client, "/v1/chat/completions", BODY, "pk-wrong"), 401)
    key = await sync_to_async(
        lambda: get_user_model().objects.get(username="alice").api_keys.get()
    )()
    await sync_to_async(api_key_revoke)(key=key)
    assert_openai_error(await post_json(client, "/v1/chat/completions", BODY, secret), 401)
    assert_openai_error(await client.get("/v1/models"), 401)


async def test_invalid_bodies_are_400_naming_the_field(secret, scripted) -> None:
    client = AsyncClient()
    error = assert_openai_error(
        await post_json(client, "/v1/chat/completions", {**BODY, "max_tokens": -3}, secret), 400
    )
    assert error["param"] == "max_tokens"
    assert_openai_error(
        await post_json(
            client, "/v1/chat/completions", {"model": "parley", "messages": []}, secret
        ),
        400,
    )
    assert_openai_error(await post_json(client, "/v1/chat/completions", b"\xff\xfe", secret), 400)
    assert_openai_error(await post_json(client, "/v1/chat/completions", "{oops", secret), 400)
    assert_openai_error(
        await post_json(client, "/v1/chat/completions", BODY, secret, X_Turn_Type="bogus"), 400
    )
    assert scripted == []


async def test_unknown_model_is_404(secret, scripted) -> None:
    error = assert_openai_error(
        await post_json(AsyncClient(), "/v1/chat/completions", {**BODY, "model": "gpt-9"}, secret),
        404,
    )
    assert error["code"] == "model_not_found" and error["param"] == "model"


async def test_oversized_body_is_413(secret, settings) -> None:
    settings.API_MAX_BODY_BYTES = 1000
    big = {**BODY, "messages": [{"role": "user", "content": "x" * 5000}]}
    assert_openai_error(await post_json(AsyncClient(), "/v1/chat/completions", big, secret), 413)


@pytest.mark.redis
async def test_rate_limit_is_429_with_retry_after(secret, scripted, settings) -> None:
    import redis

    # Key ids restart with each test database: forget counts a run a minute ago left behind.
    broker = redis.Redis.from_url(settings.REDIS_URL)
    for name in broker.scan_iter("parley:ratelimit:*"):
        broker.delete(name)
    settings.API_RATE_LIMIT_PER_MINUTE = 2
    client = AsyncClient()
    statuses = [
        (await post_json(client, "/v1/chat/completions", BODY, secret)).status_code
        for _ in range(2)
    ]
    assert statuses == [200, 200]
    response = await post_json(client, "/v1/chat/completions", BODY, secret)
    assert_openai_error(response, 429)
    assert int(response["Retry-After"]) >= 1


async def test_serving_down_is_503_with_retry_after_and_the_message_is_kept(
    secret, settings
) -> None:
    settings.VLLM_BASE_URLS = ["http://127.0.0.1:9/v1"]
    import webapp.inference

    webapp.inference._replicas = None
    try:
        response = await post_json(AsyncClient(), "/v1/chat/completions", BODY, secret)
    finally:
        webapp.inference._replicas = None
    error = assert_openai_error(response, 503)
    assert error["type"] == "service_unavailable" and response["Retry-After"]
    assert await sync_to_async(Message.objects.filter(role="user", content="hi").count)() == 1


async def test_wrong_method_and_unknown_path_are_openai_errors(secret) -> None:
    client = AsyncClient()
    assert_openai_error(
        await client.get("/v1/chat/completions", headers={"Authorization": f"Bearer {secret}"}), 405
    )
    assert_openai_error(await client.get("/v1/nothing-here"), 404)


async def test_services_unavailable_mid_stream_is_reported_in_the_stream(
    secret, monkeypatch
) -> None:
    async def failing(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        yield scripted_chunks("one two")[1]
        raise ServingUnavailable("gone")

    monkeypatch.setattr("webapp.api.completions.stream_chat", failing)
    response = await post_json(
        AsyncClient(), "/v1/chat/completions", {**BODY, "stream": True}, secret
    )
    raw = b"".join([part async for part in response.streaming_content]).decode()
    assert '"error"' in raw and raw.rstrip().endswith("data: [DONE]")
    answer = await sync_to_async(Message.objects.get)(role="assistant")
    assert answer.status == "failed" and answer.content == "one"


async def test_a_database_that_cannot_be_reached_is_503_not_500(secret, scripted, monkeypatch):
    from django.db import OperationalError

    from webapp.api import admission

    def unreachable(*, secret: str):
        raise OperationalError("connection refused")

    monkeypatch.setattr(admission, "api_key_authenticate", unreachable)
    admission.forget_keys()
    response = await post_json(AsyncClient(), "/v1/chat/completions", BODY, secret)
    error = assert_openai_error(response, 503)
    assert error["code"] == "storage_unavailable" and int(response["Retry-After"]) >= 1
    assert scripted == []  # the model was never asked
