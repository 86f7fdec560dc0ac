"""/v1 in-process: a completion recorded with its tokens, feedback on it, streaming, the model
list and the schema, with a scripted model server."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from tests.webapp.api.openai_format import BODY, assert_openai_error, post_json
from webapp.api.keys import api_key_create
from webapp.chat.models import Feedback, Message

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("close_worker_thread_connections"),
]


async def test_a_completion_is_recorded_with_its_tokens_and_takes_feedback(
    secret, scripted
) -> None:
    client = AsyncClient()
    response = await post_json(client, "/v1/chat/completions", BODY, secret, X_Session_Id="abc")
    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["choices"][0]["message"]["content"] == "Hello there friend"
    assert body["model"] == "parley" and body["usage"]["total_tokens"] == 6
    assert scripted[0]["model"] == "base"

    answer = await sync_to_async(Message.objects.get)(completion_id=body["id"])
    assert answer.token_ids == [100, 101, 102] and answer.token_logprobs == [-0.5, -0.5, -0.5]
    assert answer.prompt_token_ids == [1, 2, 3] and answer.status == "complete"

    fb = await post_json(
        client,
        "/v1/feedback",
        {"completion_id": body["id"], "rating": -1, "comment": "Too chatty, be brief."},
        secret,
    )
    assert fb.status_code == 200 and json.loads(fb.content)["rating"] == -1
    stored = await sync_to_async(Feedback.objects.get)(message=answer)
    assert (stored.rating, stored.comment) == (-1, "Too chatty, be brief.")
    assert_openai_error(
        await post_json(
            client, "/v1/feedback", {"completion_id": "chatcmpl-nope", "rating": 1}, secret
        ),
        404,
    )
    assert_openai_error(
        await post_json(client, "/v1/feedback", {"completion_id": body["id"], "rating": 5}, secret),
        400,
    )


async def test_feedback_on_another_users_completion_is_404(secret, scripted) -> None:
    client = AsyncClient()
    body = json.loads((await post_json(client, "/v1/chat/completions", BODY, secret)).content)
    bob = await sync_to_async(get_user_model().objects.create_user)("bob")
    bob_secret = (await sync_to_async(api_key_create)(owner=bob))[1]
    assert_openai_error(
        await post_json(
            client, "/v1/feedback", {"completion_id": body["id"], "rating": 1}, bob_secret
        ),
        404,
    )


async def test_streaming_forwards_each_chunk_then_done(secret, scripted) -> None:
    response = await post_json(
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


async def test_models_lists_the_stable_id_and_the_base(secret) -> None:
    response = await AsyncClient().get("/v1/models", headers={"Authorization": f"Bearer {secret}"})
    ids = [m["id"] for m in json.loads(response.content)["data"]]
    assert ids == ["parley", "SmolLM2-135M-Instruct"]


async def test_the_openapi_schema_is_served() -> None:
    schema = json.loads((await AsyncClient().get("/v1/openapi.json")).content)
    assert {"/v1/models", "/v1/chat/completions", "/v1/feedback"} <= set(schema["paths"])
