"""/v1 in-process: auth, errors in OpenAI format, recording, with a scripted model server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from webapp.api.keys import api_key_create, api_key_revoke
from webapp.chat.models import Feedback, Message
from webapp.inference import ServingUnavailable

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

BODY = {"model": "parley", "messages": [{"role": "user", "content": "hi"}]}


def _chunks(text: str) -> list[dict]:
    chunks = [
        {
            "id": "x",
            "created": 1,
            "prompt_token_ids": [1, 2, 3],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        }
    ]
    for i, piece in enumerate(text.split(" ")):
        chunks.append(
            {
                "id": "x",
                "created": 1,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": (" " if i else "") + piece},
                        "token_ids": [100 + i],
                        "logprobs": {
                            "content": [
                                {"token": piece, "logprob": -0.5, "bytes": [], "top_logprobs": []}
                            ]
                        },
                    }
                ],
            }
        )
    chunks.append(
        {"id": "x", "created": 1, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    )
    chunks.append(
        {
            "id": "x",
            "created": 1,
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
        }
    )
    return chunks


@pytest.fixture
def scripted(monkeypatch):
    calls: list[dict] = []

    async def fake_stream(
        messages, *, model, params=None, base_url=None, adapter_path=""
    ) -> AsyncIterator[dict]:
        calls.append(
            {"messages": messages, "model": model, "params": params, "adapter": adapter_path}
        )
        for chunk in _chunks("Hello there friend"):
            yield chunk

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    return calls


@pytest.fixture
def secret():
    user = get_user_model().objects.create_user("alice")
    return api_key_create(owner=user)[1]


def _post(client: AsyncClient, path: str, body, secret: str | None, **headers):
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", headers=headers)


def _assert_openai_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = json.loads(response.content)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


async def test_missing_bad_and_revoked_keys_are_401(secret) -> None:
    client = AsyncClient()
    _assert_openai_error(await _post(client, "/v1/chat/completions", BODY, None), 401)
    _assert_openai_error(await _post(client, "/v1/chat/completions", BODY, "pk-wrong"), 401)
    key = await sync_to_async(
        lambda: get_user_model().objects.get(username="alice").api_keys.get()
    )()
    await sync_to_async(api_key_revoke)(key=key)
    _assert_openai_error(await _post(client, "/v1/chat/completions", BODY, secret), 401)
    _assert_openai_error(await client.get("/v1/models"), 401)


async def test_invalid_bodies_are_400_naming_the_field(secret, scripted) -> None:
    client = AsyncClient()
    error = _assert_openai_error(
        await _post(client, "/v1/chat/completions", {**BODY, "max_tokens": -3}, secret), 400
    )
    assert error["param"] == "max_tokens"
    _assert_openai_error(
        await _post(client, "/v1/chat/completions", {"model": "parley", "messages": []}, secret),
        400,
    )
    _assert_openai_error(await _post(client, "/v1/chat/completions", b"\xff\xfe", secret), 400)
    _assert_openai_error(await _post(client, "/v1/chat/completions", "{oops", secret), 400)
    _assert_openai_error(
        await _post(client, "/v1/chat/completions", BODY, secret, X_Turn_Type="bogus"), 400
    )
    assert scripted == []


async def test_unknown_model_is_404(secret, scripted) -> None:
    error = _assert_openai_error(
        await _post(AsyncClient(), "/v1/chat/completions", {**BODY, "model": "gpt-9"}, secret), 404
    )
    assert error["code"] == "model_not_found" and error["param"] == "model"


async def test_oversized_body_is_413(secret, settings) -> None:
    settings.API_MAX_BODY_BYTES = 1000
    big = {**BODY, "messages": [{"role": "user", "content": "x" * 5000}]}
    _assert_openai_error(await _post(AsyncClient(), "/v1/chat/completions", big, secret), 413)


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
        (await _post(client, "/v1/chat/completions", BODY, secret)).status_code for _ in range(2)
    ]
    assert statuses == [200, 200]
    response = await _post(client, "/v1/chat/completions", BODY, secret)
    _assert_openai_error(response, 429)
    assert int(response["Retry-After"]) >= 1


async def test_serving_down_is_503_with_retry_after_and_the_message_is_kept(
    secret, settings
) -> None:
    settings.VLLM_BASE_URLS = ["http://127.0.0.1:9/v1"]
    import webapp.inference

    webapp.inference._replicas = None
    try:
        response = await _post(AsyncClient(), "/v1/chat/completions", BODY, secret)
    finally:
        webapp.inference._replicas = None
    error = _assert_openai_error(response, 503)
    assert error["type"] == "service_unavailable" and response["Retry-After"]
    assert await sync_to_async(Message.objects.filter(role="user", content="hi").count)() == 1


async def test_wrong_method_and_unknown_path_are_openai_errors(secret) -> None:
    client = AsyncClient()
    _assert_openai_error(
        await client.get("/v1/chat/completions", headers={"Authorization": f"Bearer {secret}"}), 405
    )
    _assert_openai_error(await client.get("/v1/nothing-here"), 404)


async def test_a_completion_is_recorded_with_its_tokens_and_takes_feedback(
    secret, scripted
) -> None:
    client = AsyncClient()
    response = await _post(client, "/v1/chat/completions", BODY, secret, X_Session_Id="abc")
    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["choices"][0]["message"]["content"] == "Hello there friend"
    assert body["model"] == "parley" and body["usage"]["total_tokens"] == 6
    assert scripted[0]["model"] == "base"

    answer = await sync_to_async(Message.objects.get)(completion_id=body["id"])
    assert answer.token_ids == [100, 101, 102] and answer.token_logprobs == [-0.5, -0.5, -0.5]
    assert answer.prompt_token_ids == [1, 2, 3] and answer.status == "complete"

    fb = await _post(
        client,
        "/v1/feedback",
        {"completion_id": body["id"], "rating": -1, "comment": "Too chatty, be brief."},
        secret,
    )
    assert fb.status_code == 200 and json.loads(fb.content)["rating"] == -1
    stored = await sync_to_async(Feedback.objects.get)(message=answer)
    assert (stored.rating, stored.comment) == (-1, "Too chatty, be brief.")
    _assert_openai_error(
        await _post(
            client, "/v1/feedback", {"completion_id": "chatcmpl-nope", "rating": 1}, secret
        ),
        404,
    )
    _assert_openai_error(
        await _post(client, "/v1/feedback", {"completion_id": body["id"], "rating": 5}, secret), 400
    )


async def test_feedback_on_another_users_completion_is_404(secret, scripted) -> None:
    client = AsyncClient()
    body = json.loads((await _post(client, "/v1/chat/completions", BODY, secret)).content)
    bob = await sync_to_async(get_user_model().objects.create_user)("bob")
    bob_secret = (await sync_to_async(api_key_create)(owner=bob))[1]
    _assert_openai_error(
        await _post(client, "/v1/feedback", {"completion_id": body["id"], "rating": 1}, bob_secret),
        404,
    )


async def test_streaming_forwards_each_chunk_then_done(secret, scripted) -> None:
    response = await _post(
        AsyncClient(),
        "/v1/chat/completions",
        {**BODY, "stream": True, "stream_options": {"include_usage": True}},
        secret,
    )
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    raw = b"".join([part async for part in response.streaming_content]).decode()
    events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    content = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    assert [c for c in content if c] == ["Hello", " there", " friend"]
    assert chunks[-1]["usage"]["total_tokens"] == 6 and chunks[-1]["choices"] == []
    assert all("token_ids" not in json.dumps(c) for c in chunks)
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")


async def test_a_burst_of_streams_shares_one_key_lookup_and_records_every_turn(
    secret, scripted, monkeypatch, settings
) -> None:
    import asyncio

    from webapp.api import admission, keys

    settings.USER_MAX_STREAMS = 8  # the default per-user limit is lower than this burst
    admission.forget_keys()
    lookups = []
    real = keys.api_key_authenticate

    def counting(*, secret: str):
        lookups.append(secret)
        return real(secret=secret)

    monkeypatch.setattr(admission, "api_key_authenticate", counting)

    async def one(i: int) -> str:
        body = {**BODY, "stream": True, "messages": [{"role": "user", "content": f"hi {i}"}]}
        response = await _post(AsyncClient(), "/v1/chat/completions", body, secret)
        assert response.status_code == 200
        return b"".join([part async for part in response.streaming_content]).decode()

    streams = await asyncio.gather(*(one(i) for i in range(8)))
    assert all(raw.rstrip().endswith("data: [DONE]") for raw in streams)
    assert len(lookups) == 1
    answers = await sync_to_async(list)(
        Message.objects.filter(role="assistant").values_list("content", "status")
    )
    assert sorted(answers) == [("Hello there friend", "complete")] * 8


def _age_remembered_keys(seconds: float) -> None:
    """Make every key this process remembers look ``seconds`` older (as if time had passed)."""
    from webapp.api import admission

    for name, (at, key, version) in list(admission._remembered.items()):
        admission._remembered[name] = (at - seconds, key, version)


@pytest.fixture
def slow_lookups(monkeypatch):
    """Key lookups that take 0.3 s, logging when each starts and ends beside the model's calls."""
    import time

    from webapp.api import admission, keys

    events: list[str] = []

    def slow(*, secret: str):
        events.append("lookup started")
        time.sleep(0.3)
        key = keys.api_key_authenticate(secret=secret)
        events.append("lookup done")
        return key

    monkeypatch.setattr(admission, "api_key_authenticate", slow)
    return events


@pytest.fixture
def logged_model(monkeypatch, slow_lookups):
    """The scripted model server, logging into the same list as ``slow_lookups``."""
    calls: list[dict] = []

    async def fake_stream(
        messages, *, model, params=None, base_url=None, adapter_path=""
    ) -> AsyncIterator[dict]:
        calls.append({"model": model})
        slow_lookups.append(f"model started on {model}")
        try:
            for chunk in _chunks("Hello there friend"):
                yield chunk
        finally:
            slow_lookups.append(f"model closed on {model}")

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    return calls


async def test_a_remembered_key_starts_the_model_while_it_is_checked_again(
    secret, logged_model, slow_lookups
) -> None:
    client = AsyncClient()
    assert (await _post(client, "/v1/chat/completions", BODY, secret)).status_code == 200
    # A new key is looked up before the model sees anything.
    assert slow_lookups[:3] == ["lookup started", "lookup done", "model started on base"]
    slow_lookups.clear()
    _age_remembered_keys(30)
    response = await _post(client, "/v1/chat/completions", BODY, secret)
    assert response.status_code == 200
    assert json.loads(response.content)["choices"][0]["message"]["content"] == "Hello there friend"
    # Remembered but not fresh: the model starts first, the lookup runs alongside.
    assert slow_lookups.index("model started on base") < slow_lookups.index("lookup done")
    assert slow_lookups.count("lookup started") == 1


async def test_a_key_revoked_elsewhere_gets_401_and_the_started_answer_is_dropped(
    secret, logged_model, slow_lookups
) -> None:
    from django.utils import timezone

    from webapp.api.models import ApiKey

    client = AsyncClient()
    assert (await _post(client, "/v1/chat/completions", BODY, secret)).status_code == 200
    # Revoked by another process: this one still remembers the key.
    await sync_to_async(ApiKey.objects.update)(revoked_at=timezone.now())
    _age_remembered_keys(30)
    slow_lookups.clear()
    response = await _post(client, "/v1/chat/completions", {**BODY, "stream": True}, secret)
    _assert_openai_error(response, 401)
    assert slow_lookups.index("model started on base") < slow_lookups.index("lookup done")
    assert "model closed on base" in slow_lookups
    assert await sync_to_async(Message.objects.filter(role="assistant").count)() == 1
    # Forgotten: the next request is looked up before the model starts, and refused.
    slow_lookups.clear()
    _assert_openai_error(await _post(client, "/v1/chat/completions", BODY, secret), 401)
    assert slow_lookups == ["lookup started", "lookup done"]


async def test_a_version_published_meanwhile_answers_instead_of_the_remembered_one(
    secret, logged_model, slow_lookups
) -> None:
    from webapp.learning.models import PolicyVersion

    client = AsyncClient()
    assert (await _post(client, "/v1/chat/completions", BODY, secret)).status_code == 200

    def publish() -> None:
        PolicyVersion.objects.filter(number=0).update(status="retired")
        PolicyVersion.objects.create(number=1, status="live", adapter_path="/x")

    await sync_to_async(publish)()
    _age_remembered_keys(30)
    slow_lookups.clear()
    response = await _post(client, "/v1/chat/completions", {**BODY, "stream": True}, secret)
    assert response.status_code == 200 and response["X-Parley-Version"] == "v1"
    raw = b"".join([part async for part in response.streaming_content]).decode()
    events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in events if c["choices"])
    assert text == "Hello there friend"
    assert [c["model"] for c in logged_model][-2:] == ["base", "parley-v1"]
    assert slow_lookups.index("model closed on base") < slow_lookups.index(
        "model started on parley-v1"
    )
    answer = await sync_to_async(
        lambda: (
            Message.objects.select_related("policy_version")
            .filter(role="assistant")
            .order_by("-pk")
            .first()
        )
    )()
    assert answer.policy_version.number == 1 and answer.served_model == "parley-v1"


async def test_services_unavailable_mid_stream_is_reported_in_the_stream(
    secret, monkeypatch
) -> None:
    async def failing(messages, *, model, params=None, base_url=None, adapter_path=""):
        yield _chunks("one two")[1]
        raise ServingUnavailable("gone")

    monkeypatch.setattr("webapp.api.completions.stream_chat", failing)
    response = await _post(AsyncClient(), "/v1/chat/completions", {**BODY, "stream": True}, secret)
    raw = b"".join([part async for part in response.streaming_content]).decode()
    assert '"error"' in raw and raw.rstrip().endswith("data: [DONE]")
    answer = await sync_to_async(Message.objects.get)(role="assistant")
    assert answer.status == "failed" and answer.content == "one"


async def test_models_lists_the_stable_id_and_the_base(secret) -> None:
    response = await AsyncClient().get("/v1/models", headers={"Authorization": f"Bearer {secret}"})
    ids = [m["id"] for m in json.loads(response.content)["data"]]
    assert ids == ["parley", "SmolLM2-135M-Instruct"]


async def test_the_openapi_schema_is_served() -> None:
    schema = json.loads((await AsyncClient().get("/v1/openapi.json")).content)
    assert {"/v1/models", "/v1/chat/completions", "/v1/feedback"} <= set(schema["paths"])


@pytest.fixture(autouse=True)
async def _close_worker_thread_connections():
    """sync_to_async runs the ORM in a worker thread; close its connection so the test
    database can be dropped at the end of the run."""
    yield
    from django.db import connections

    await sync_to_async(connections.close_all)()


async def test_a_database_that_cannot_be_reached_is_503_not_500(secret, scripted, monkeypatch):
    from django.db import OperationalError

    from webapp.api import admission

    def unreachable(*, secret: str):
        raise OperationalError("connection refused")

    monkeypatch.setattr(admission, "api_key_authenticate", unreachable)
    admission.forget_keys()
    response = await _post(AsyncClient(), "/v1/chat/completions", BODY, secret)
    error = _assert_openai_error(response, 503)
    assert error["code"] == "storage_unavailable" and int(response["Retry-After"]) >= 1
    assert scripted == []  # the model was never asked
