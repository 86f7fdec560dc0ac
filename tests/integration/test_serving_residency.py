"""Loading and unloading on the real vLLM: two versions of one person published, the sweep with
no grace leaves only the live one, and a request for the unloaded one still gets its answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.lora_serving_setup import make_adapters
from tests.factories import UserFactory
from trainer.publish import loaded_adapters
from webapp.inference import stream_chat
from webapp.learning.models import PolicyVersion
from webapp.learning.workflows.publishing import policy_version_publish
from webapp.learning.workflows.residency import adapters_unload_retired
from webapp.replicas import lineage_key

pytestmark = [pytest.mark.stack, pytest.mark.django_db, pytest.mark.services]

MODEL_ID = "residency"
"""The test's own adapter names: the sweep leaves the running system's (``parley-v…``) alone."""


def ours(stack) -> list[str]:
    names = loaded_adapters(stack.vllm_url, api_key=stack.vllm_api_key)
    return sorted(name for name in names if name.startswith(f"{MODEL_ID}-"))


async def answer(model: str, folder: Path, lineage: str) -> str:
    text = ""
    async for chunk in stream_chat(
        [{"role": "user", "content": "Name a colour."}],
        model=model,
        params={"max_tokens": 4, "temperature": 0},
        adapter_path=str(folder),
        lineage=lineage,
    ):
        text += "".join((c.get("delta") or {}).get("content") or "" for c in chunk["choices"])
    return text


def test_the_sweep_leaves_only_the_live_version_and_a_request_loads_an_old_one_again(
    stack, settings, prepared_model: Path, tmp_path: Path
) -> None:
    settings.VLLM_BASE_URLS = [stack.vllm_url]
    settings.VLLM_API_KEY = stack.vllm_api_key
    settings.PARLEY_MODEL_ID = MODEL_ID
    settings.ADAPTER_UNLOAD_GRACE_S = 0
    folders = make_adapters(prepared_model, tmp_path, 2)
    owner = UserFactory()
    for number, folder in enumerate(folders, start=1):
        version = PolicyVersion.objects.create(number=number, owner=owner, adapter_path=str(folder))
        policy_version_publish(version=version)
    assert ours(stack) == [f"{MODEL_ID}-v1", f"{MODEL_ID}-v2"]

    assert adapters_unload_retired() == {stack.vllm_url: [f"{MODEL_ID}-v1"]}
    assert ours(stack) == [f"{MODEL_ID}-v2"]

    # An old answer's alternatives, say, ask for v1 again: it is loaded back, not refused.
    assert asyncio.run(answer(f"{MODEL_ID}-v1", folders[0], lineage_key(owner.pk)))
    assert ours(stack) == [f"{MODEL_ID}-v1", f"{MODEL_ID}-v2"]
    assert adapters_unload_retired() == {stack.vllm_url: [f"{MODEL_ID}-v1"]}
