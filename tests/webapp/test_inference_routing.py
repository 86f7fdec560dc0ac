"""Sticky by lineage: the vLLM client sends a lineage's requests to its home replica and falls
back along the lineage's order when a replica does not answer, against real HTTP servers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from bench.launching import free_port
from tests.webapp.test_inference import CHUNKS, FakeVllm, serve_fake
from webapp import replicas
from webapp.inference import ServingError, stream_chat
from webapp.replicas import DownReplicas, rendezvous_order


class FailingVllm(FakeVllm):
    """Answers every chat with a 503, as a replica that is still starting does."""

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        return web.json_response({"error": {"message": "starting"}}, status=503)


@pytest.fixture(autouse=True)
def nothing_down(monkeypatch) -> DownReplicas:
    fresh = DownReplicas(for_s=replicas.DOWN_FOR_S)
    monkeypatch.setattr(replicas, "down", fresh)
    return fresh


@pytest.fixture
async def two_replicas() -> AsyncIterator[dict[str, FakeVllm]]:
    fakes = [FakeVllm(), FakeVllm()]
    served = [await serve_fake(fake) for fake in fakes]
    yield {url: fake for fake, (_, url) in zip(fakes, served, strict=True)}
    for runner, _ in served:
        await runner.cleanup()


def lineage_at_home_on(home: str, urls: list[str]) -> str:
    """A lineage key whose home, among ``urls``, is ``home``."""
    return next(
        key
        for owner_id in range(1, 1000)
        if rendezvous_order(key := replicas.lineage_key(owner_id), urls)[0] == home
    )


async def ask(lineage: str, *, model: str = "base", adapter_path: str = "") -> list[dict]:
    return [
        chunk
        async for chunk in stream_chat(
            [{"role": "user", "content": "hi"}],
            model=model,
            adapter_path=adapter_path,
            lineage=lineage,
        )
    ]


async def test_a_lineages_requests_all_go_to_its_home_replica(settings, two_replicas) -> None:
    urls = list(two_replicas)
    settings.VLLM_BASE_URLS = urls
    for home in urls:
        lineage = lineage_at_home_on(home, urls)
        before = {url: len(fake.bodies) for url, fake in two_replicas.items()}
        for _ in range(3):
            assert await ask(lineage) == CHUNKS
        assert {url: len(fake.bodies) - before[url] for url, fake in two_replicas.items()} == {
            url: 3 if url == home else 0 for url in urls
        }


async def test_when_the_home_refuses_connections_the_next_replica_loads_the_adapter_and_answers(
    settings, two_replicas, nothing_down
) -> None:
    live = next(iter(two_replicas))
    dead = f"http://127.0.0.1:{free_port()}/v1"
    settings.VLLM_BASE_URLS = [dead, live]
    lineage = lineage_at_home_on(dead, [dead, live])
    answer = await ask(lineage, model="parley-v3", adapter_path="/adapters/update-3")
    assert answer == CHUNKS
    assert two_replicas[live].loads == [
        {"lora_name": "parley-v3", "lora_path": "/adapters/update-3"}
    ]
    assert nothing_down.is_down(dead) and replicas.replica_order(lineage) == [live, dead]


async def test_a_replica_failing_before_the_first_byte_passes_the_request_on(settings) -> None:
    failing, fine = FailingVllm(), FakeVllm()
    (failing_runner, failing_url), (fine_runner, fine_url) = [
        await serve_fake(failing),
        await serve_fake(fine),
    ]
    try:
        settings.VLLM_BASE_URLS = [failing_url, fine_url]
        lineage = lineage_at_home_on(failing_url, settings.VLLM_BASE_URLS)
        assert await ask(lineage) == CHUNKS
        assert len(failing.bodies) == 1 and len(fine.bodies) == 1
        assert not replicas.down.is_down(failing_url)  # it answered: not down, only failing
    finally:
        await failing_runner.cleanup()
        await fine_runner.cleanup()


async def test_a_refusal_is_not_sent_to_another_replica(settings, two_replicas) -> None:
    urls = list(two_replicas)
    settings.VLLM_BASE_URLS = urls
    lineage = lineage_at_home_on(urls[0], urls)
    with pytest.raises(ServingError):
        await ask(lineage, model="missing")
    assert len(two_replicas[urls[0]].bodies) == 1 and two_replicas[urls[1]].bodies == []
