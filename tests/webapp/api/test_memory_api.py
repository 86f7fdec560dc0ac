"""/v1/memories and memories in /v1 chat requests, in-process with a scripted model server."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from tests.webapp.api.openai_format import BODY, assert_openai_error, post_json
from trainer.memory_prompt import MARKER
from webapp.api import admission
from webapp.api.keys import api_key_create
from webapp.api.models import ApiKey
from webapp.chat.models import Message
from webapp.memory import services
from webapp.memory.models import Memory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("close_worker_thread_connections"),
]


def _call(client: AsyncClient, method: str, path: str, secret: str, body=None):
    headers = {"Authorization": f"Bearer {secret}"}
    data = json.dumps(body) if body is not None else None
    return getattr(client, method)(
        path, data=data, content_type="application/json", headers=headers
    )


async def test_memories_are_listed_added_changed_and_deleted(secret) -> None:
    client = AsyncClient()
    created = await _call(client, "post", "/v1/memories", secret, {"text": "Call me Sam"})
    assert created.status_code == 201
    memory = json.loads(created.content)
    assert memory["object"] == "memory" and memory["state"] == "active"
    assert memory["history"][0]["text"] == "Call me Sam"
    path = f"/v1/memories/{memory['id']}"
    edited = json.loads(
        (await _call(client, "patch", path, secret, {"text": "Call me Sammy"})).content
    )
    assert edited["text"] == "Call me Sammy" and len(edited["history"]) == 2
    paused = json.loads((await _call(client, "patch", path, secret, {"state": "paused"})).content)
    assert paused["state"] == "paused"
    listing = json.loads((await _call(client, "get", "/v1/memories", secret)).content)
    assert [m["text"] for m in listing["data"]] == ["Call me Sammy"]
    deleted = json.loads((await _call(client, "delete", path, secret)).content)
    assert deleted == {"id": memory["id"], "object": "memory.deleted", "deleted": True}
    assert json.loads((await _call(client, "get", "/v1/memories", secret)).content)["data"] == []
    everything = await _call(client, "get", "/v1/memories?state=all", secret)
    assert json.loads(everything.content)["data"][0]["state"] == "deleted"


async def test_a_proposal_is_kept_through_the_api(secret) -> None:
    key = await sync_to_async(ApiKey.objects.get)()
    proposal = await sync_to_async(services.memory_propose)(
        owner=key.owner_id, text="Answer in km", source="comment"
    )
    client = AsyncClient()
    waiting = await _call(client, "get", "/v1/memories?state=proposed", secret)
    assert [m["id"] for m in json.loads(waiting.content)["data"]] == [proposal.pk]
    kept = await _call(
        client, "patch", f"/v1/memories/{proposal.pk}", secret,
        {"state": "active", "text": "Always answer in km"},
    )  # fmt: skip
    assert json.loads(kept.content)["state"] == "active"
    assert json.loads(kept.content)["text"] == "Always answer in km"


async def test_bad_input_gets_openai_errors(secret) -> None:
    client = AsyncClient()
    assert_openai_error(await _call(client, "post", "/v1/memories", secret, {"text": 5}), 400)
    error = assert_openai_error(
        await _call(client, "post", "/v1/memories", secret, {"text": "x" * 5000}), 400
    )
    assert error["param"] == "text" and "at most" in error["message"]
    created = json.loads(
        (await _call(client, "post", "/v1/memories", secret, {"text": "Call me Sam"})).content
    )
    path = f"/v1/memories/{created['id']}"
    assert_openai_error(await _call(client, "patch", path, secret, {"state": "gone"}), 400)
    assert_openai_error(await _call(client, "patch", path, secret, {"colour": "red"}), 400)
    assert_openai_error(await _call(client, "get", "/v1/memories?state=odd", secret), 400)
    assert_openai_error(await _call(client, "put", path, secret, {"text": "x"}), 405)


async def test_another_persons_memory_is_404(secret) -> None:
    bob = await sync_to_async(get_user_model().objects.create_user)("bob")
    bobs = await sync_to_async(services.memory_add)(owner=bob, text="Call me Bob")
    client = AsyncClient()
    for method, body in (("get", None), ("patch", {"state": "paused"}), ("delete", None)):
        error = assert_openai_error(
            await _call(client, method, f"/v1/memories/{bobs.pk}", secret, body), 404
        )
        assert error["code"] == "memory_not_found"
    assert (await sync_to_async(Memory.objects.get)(pk=bobs.pk)).state == "active"


async def test_a_chat_request_is_given_the_memories_and_records_them(secret, scripted) -> None:
    key = await sync_to_async(ApiKey.objects.get)()
    memory = await sync_to_async(services.memory_add)(owner=key.owner_id, text="Call me Sam")
    client = AsyncClient()
    body = json.loads((await post_json(client, "/v1/chat/completions", BODY, secret)).content)
    assert scripted[-1]["messages"][-1]["content"] == "hi" + MARKER + "Call me Sam."
    answer = await sync_to_async(Message.objects.get)(completion_id=body["id"])
    assert answer.memories == [{"id": memory.pk, "text": "Call me Sam"}]
    question = await sync_to_async(lambda: answer.parent)()
    assert question.content == "hi"  # the conversation keeps what the client sent

    await post_json(client, "/v1/chat/completions", BODY, secret, X_Parley_Memory="off")
    assert scripted[-1]["messages"][-1]["content"] == "hi"
    error = assert_openai_error(
        await post_json(client, "/v1/chat/completions", BODY, secret, X_Parley_Memory="maybe"),
        400,
    )
    assert error["param"] == "X-Parley-Memory"


async def test_a_key_can_serve_no_memories_and_a_deletion_is_served_at_once(
    secret, scripted
) -> None:
    key = await sync_to_async(ApiKey.objects.get)()
    memory = await sync_to_async(services.memory_add)(owner=key.owner_id, text="Call me Sam")
    client = AsyncClient()
    await post_json(client, "/v1/chat/completions", BODY, secret)
    assert MARKER in scripted[-1]["messages"][-1]["content"]
    await sync_to_async(services.memory_delete)(memory=memory)
    await post_json(client, "/v1/chat/completions", BODY, secret)  # the next request
    assert scripted[-1]["messages"][-1]["content"] == "hi"

    await sync_to_async(services.memory_add)(owner=key.owner_id, text="Use km")
    agent = await sync_to_async(api_key_create)(owner=await sync_to_async(lambda: key.owner)())
    await sync_to_async(ApiKey.objects.filter(pk=agent[0].pk).update)(serves_memory=False)
    await post_json(client, "/v1/chat/completions", BODY, agent[1])
    assert scripted[-1]["messages"][-1]["content"] == "hi"
    admission._remembered.clear()
