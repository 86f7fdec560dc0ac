"""``model="parley"`` through /v1 answers with the key owner's own live adapter (user scope),
never another user's; the shared live version for a user without one; one for all in shared
scope. Every answer records the version that wrote it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from tests.webapp.api.openai_format import scripted_chunks
from webapp.api.keys import api_key_create
from webapp.chat.models import Message
from webapp.learning.models import PolicyVersion

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


@pytest.fixture
def served(monkeypatch) -> list[dict]:
    """What each request asked the model server for: the adapter name and its folder."""
    calls: list[dict] = []

    async def fake_stream(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ) -> AsyncIterator[dict]:
        calls.append({"model": model, "adapter": adapter_path, "lineage": lineage})
        for chunk in scripted_chunks("Hello there friend"):
            yield chunk

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    return calls


@pytest.fixture
def lineages(settings, alice, bob, tmp_path) -> dict[str, object]:
    """Alice has her own live adapter (v1); bob has none; the shared lineage is at the base."""
    settings.LEARNING_SCOPE = "user"
    folder = tmp_path / "alice-v1"
    folder.mkdir()
    PolicyVersion.objects.get_or_create(number=0, defaults={"status": "live"})
    own = PolicyVersion.objects.create(
        number=1, owner=alice, status="live", adapter_path=str(folder)
    )
    return {
        "alice": api_key_create(owner=alice)[1],
        "bob": api_key_create(owner=bob)[1],
        "alice_version": own,
    }


async def _ask(secret: str) -> tuple[str, Message]:
    response = await AsyncClient().post(
        "/v1/chat/completions",
        data=json.dumps({"model": "parley", "messages": [{"role": "user", "content": "hi"}]}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200, response.content
    answer = await database_sync_to_async(
        lambda: (
            Message.objects.select_related("policy_version", "conversation__owner")
            .filter(role="assistant")
            .order_by("-pk")
            .first()
        )
    )()
    return response["X-Parley-Version"], answer


async def _models(secret: str) -> dict[str, str]:
    response = await AsyncClient().get("/v1/models", headers={"Authorization": f"Bearer {secret}"})
    return {entry["id"]: entry["parley_version"] for entry in json.loads(response.content)["data"]}


async def test_each_key_is_answered_by_its_owners_lineage_only(lineages, served) -> None:
    label, answer = await _ask(lineages["alice"])
    assert label == "v1" and answer.policy_version.owner_id == answer.conversation.owner_id
    alice_id = answer.conversation.owner_id
    assert served[-1] == {
        "model": "parley-v1",
        "adapter": lineages["alice_version"].adapter_path,
        "lineage": f"user-{alice_id}",  # her requests go to her adapter's home replica
    }

    label, answer = await _ask(lineages["bob"])
    # Bob never runs on alice's adapter: he gets the shared live version, the base.
    assert label == "v0" and answer.policy_version.number == 0 and answer.served_model == "base"
    bob_id = answer.conversation.owner_id
    assert served[-1] == {"model": "base", "adapter": "", "lineage": f"user-{bob_id}"}
    assert (await _models(lineages["alice"]))["parley"] == "v1"
    assert (await _models(lineages["bob"]))["parley"] == "v0"


async def test_a_user_without_an_adapter_gets_the_shared_live_version(
    lineages, served, tmp_path
) -> None:
    def publish_shared() -> PolicyVersion:
        PolicyVersion.objects.filter(number=0).update(status="retired")
        return PolicyVersion.objects.create(number=2, status="live", adapter_path=str(tmp_path))

    shared = await database_sync_to_async(publish_shared)()
    label, answer = await _ask(lineages["bob"])
    assert label == "v2" and answer.policy_version_id == shared.pk
    assert served[-1]["model"] == "parley-v2" and served[-1]["adapter"] == str(tmp_path)
    label, _ = await _ask(lineages["alice"])
    assert label == "v1"  # her own still wins over the shared one


async def test_in_shared_scope_everyone_gets_the_shared_lineage(lineages, served, settings) -> None:
    settings.LEARNING_SCOPE = "shared"
    for secret in (lineages["alice"], lineages["bob"]):
        label, answer = await _ask(secret)
        assert label == "v0" and answer.policy_version.number == 0
    assert [call["model"] for call in served] == ["base", "base"]
    # One lineage, whose adapter is on every replica: its requests are spread over them.
    assert [call["lineage"] for call in served] == ["shared", "shared"]
