"""Which key asks and which version answers (webapp.api.admission): a burst of streams shares one
key lookup, a remembered key starts the model while it is looked up again, and that lookup
still refuses a revoked key and moves the answer to a newly published version."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from tests.webapp.api.openai_format import BODY, assert_openai_error, post_json, scripted_chunks
from webapp.chat.models import Message

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("close_worker_thread_connections"),
]


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
        response = await post_json(AsyncClient(), "/v1/chat/completions", body, secret)
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

    for name, (at, *rest) in list(admission._remembered.items()):
        admission._remembered[name] = (at - seconds, *rest)


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
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ) -> AsyncIterator[dict]:
        calls.append({"model": model})
        slow_lookups.append(f"model started on {model}")
        try:
            for chunk in scripted_chunks("Hello there friend"):
                yield chunk
        finally:
            slow_lookups.append(f"model closed on {model}")

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    return calls


async def test_a_remembered_key_starts_the_model_while_it_is_checked_again(
    secret, logged_model, slow_lookups
) -> None:
    client = AsyncClient()
    assert (await post_json(client, "/v1/chat/completions", BODY, secret)).status_code == 200
    # A new key is looked up before the model sees anything.
    assert slow_lookups[:3] == ["lookup started", "lookup done", "model started on base"]
    slow_lookups.clear()
    _age_remembered_keys(30)
    response = await post_json(client, "/v1/chat/completions", BODY, secret)
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
    assert (await post_json(client, "/v1/chat/completions", BODY, secret)).status_code == 200
    # Revoked by another process: this one still remembers the key.
    await sync_to_async(ApiKey.objects.update)(revoked_at=timezone.now())
    _age_remembered_keys(30)
    slow_lookups.clear()
    response = await post_json(client, "/v1/chat/completions", {**BODY, "stream": True}, secret)
    assert_openai_error(response, 401)
    assert slow_lookups.index("model started on base") < slow_lookups.index("lookup done")
    assert "model closed on base" in slow_lookups
    assert await sync_to_async(Message.objects.filter(role="assistant").count)() == 1
    # Forgotten: the next request is looked up before the model starts, and refused.
    slow_lookups.clear()
    assert_openai_error(await post_json(client, "/v1/chat/completions", BODY, secret), 401)
    assert slow_lookups == ["lookup started", "lookup done"]


async def test_a_version_published_meanwhile_answers_instead_of_the_remembered_one(
    secret, logged_model, slow_lookups
) -> None:
    from webapp.learning.models import PolicyVersion

    client = AsyncClient()
    assert (await post_json(client, "/v1/chat/completions", BODY, secret)).status_code == 200

    def publish() -> None:
        PolicyVersion.objects.filter(number=0).update(status="retired")
        PolicyVersion.objects.create(number=1, status="live", adapter_path="/x")

    await sync_to_async(publish)()
    _age_remembered_keys(30)
    slow_lookups.clear()
    response = await post_json(client, "/v1/chat/completions", {**BODY, "stream": True}, secret)
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
