"""The vLLM client against a real HTTP server that speaks vLLM's streaming format."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from bench.launching import free_port
from webapp import replicas
from webapp.inference import (
    ServingError,
    ServingUnavailable,
    adapter_load,
    fits_for_certain,
    prompt_tokens,
    stream_chat,
)

CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"index": 0, "delta": {"content": "Hel"}, "token_ids": [1]}]},
    {"choices": [{"index": 0, "delta": {"content": "lo ☃"}, "token_ids": [2]}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]


class FakeVllm:
    """Streams CHUNKS as SSE, cut into writes at awkward places; records what it saw."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.peers: list[tuple] = []
        self.disconnected = asyncio.Event()
        self.endless = False
        self.cut_short = False
        self.drop_next = False
        self.adapters: dict[str, str] = {}
        self.loads: list[dict] = []

    async def load_lora_adapter(self, request: web.Request) -> web.Response:
        """vLLM's runtime adapter loading: a name loaded twice is refused as vLLM does."""
        body = await request.json()
        self.loads.append(body)
        if self.drop_next:  # a connection closed as the request came in: nothing loaded
            self.drop_next = False
            request.transport.close()
            return web.Response()
        await asyncio.sleep(0.05)  # a real load takes ~0.15 s: requests pile up meanwhile
        if body["lora_name"] in self.adapters:
            message = f"The lora adapter '{body['lora_name']}' has already been loaded."
            return web.json_response({"error": {"message": message}}, status=400)
        self.adapters[body["lora_name"]] = body["lora_path"]
        return web.Response(text=f"Success: LoRA adapter '{body['lora_name']}' added successfully.")

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's /tokenize of chat messages: a count (here: words plus the template's 5)."""
        body = await request.json()
        self.bodies.append(body)
        words = sum(len(str(m["content"]).split()) for m in body["messages"])
        return web.json_response({"count": words + 5, "max_model_len": 8192, "tokens": []})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        if self.drop_next:  # a connection closed as the request came in: nothing answered
            self.drop_next = False
            request.transport.close()
            return web.Response()
        self.peers.append(request.transport.get_extra_info("peername"))
        unknown_adapter = body["model"].startswith("parley-") and body["model"] not in self.adapters
        if body["model"] == "missing" or unknown_adapter:
            message = f"The model `{body['model']}` does not exist."
            return web.json_response({"error": {"message": message, "param": "model"}}, status=404)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        raw = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in CHUNKS).encode()
        try:
            for start in range(0, len(raw), 7):  # lines, and a snowman's bytes, split across reads
                await response.write(raw[start : start + 7])
            if self.cut_short:
                return response  # the body ends without [DONE]
            while self.endless:
                await response.write(b'data: {"choices": []}\n\n')
                await asyncio.sleep(0.01)
            await response.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnected.set()
            raise
        return response


async def serve_fake(fake: FakeVllm) -> tuple[web.AppRunner, str]:
    """``fake`` behind a real HTTP server: its runner (to clean up) and its ``/v1`` URL."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.chat)
    app.router.add_post("/v1/load_lora_adapter", fake.load_lora_adapter)
    app.router.add_post("/tokenize", fake.tokenize)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/v1"


@pytest.fixture
async def fake_vllm():
    fake = FakeVllm()
    runner, url = await serve_fake(fake)
    yield fake, url
    await runner.cleanup()


async def test_chunks_arrive_whole_whatever_the_reads_and_training_data_is_asked_for(
    fake_vllm,
) -> None:
    fake, url = fake_vllm
    messages = [{"role": "user", "content": "hi"}]
    chunks = [c async for c in stream_chat(messages, model="base", base_url=url)]
    assert chunks == CHUNKS
    assert fake.bodies[0]["logprobs"] is True and fake.bodies[0]["return_token_ids"] is True
    assert fake.bodies[0]["stream"] is True and fake.bodies[0]["messages"] == messages
    # The connection was read to its end and is reused for the next answer.
    again = [c async for c in stream_chat(messages, model="base", base_url=url)]
    assert again == CHUNKS and fake.peers[0] == fake.peers[1]


async def test_a_connection_the_server_drops_before_answering_is_sent_again(fake_vllm) -> None:
    """vLLM closes an idle connection after its keep-alive (5 s): a request that went out on it
    just then got no answer. The client sends it again instead of failing it with a 503."""
    fake, url = fake_vllm
    fake.drop_next = True
    chunks = [c async for c in stream_chat([], model="base", base_url=url)]
    assert chunks == CHUNKS
    assert len(fake.bodies) == 2 and fake.bodies[0] == fake.bodies[1]


def test_idle_connections_are_given_up_before_vllms_keep_alive_closes_them() -> None:
    from webapp.inference import KEEPALIVE_TIMEOUT_S

    assert KEEPALIVE_TIMEOUT_S < 5  # VLLM_HTTP_TIMEOUT_KEEP_ALIVE's default


async def test_a_refusal_is_a_serving_error_with_vllms_message(fake_vllm) -> None:
    _, url = fake_vllm
    with pytest.raises(ServingError) as refused:
        await anext(stream_chat([], model="missing", base_url=url))
    assert refused.value.status == 404 and "does not exist" in refused.value.message
    assert refused.value.param == "model"


async def test_no_server_is_serving_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ServingUnavailable):
        await anext(stream_chat([], model="base", base_url=url))


async def test_closing_the_stream_early_disconnects_so_vllm_aborts(fake_vllm) -> None:
    fake, url = fake_vllm
    fake.endless = True
    stream = stream_chat([{"role": "user", "content": "hi"}], model="base", base_url=url)
    assert (await anext(stream)) == CHUNKS[0]
    await stream.aclose()
    await asyncio.wait_for(fake.disconnected.wait(), timeout=5)


async def test_an_answer_cut_short_is_serving_unavailable_after_what_arrived(fake_vllm) -> None:
    fake, url = fake_vllm
    fake.cut_short = True
    received = []
    with pytest.raises(ServingUnavailable):
        async for chunk in stream_chat([], model="base", base_url=url):
            received.append(chunk)
    assert received == CHUNKS


async def test_an_adapter_the_server_does_not_know_yet_is_loaded_then_answers(fake_vllm) -> None:
    """After a vLLM restart only the shared adapter is loaded: a user's first request loads
    theirs into that replica (once, shared by the requests waiting for it) instead of failing."""
    fake, url = fake_vllm
    messages = [{"role": "user", "content": "hi"}]

    async def ask() -> list[dict]:
        return [
            c
            async for c in stream_chat(
                messages, model="parley-v7", base_url=url, adapter_path="/adapters/update-7"
            )
        ]

    first, second = await asyncio.gather(ask(), ask())
    assert first == second == CHUNKS
    assert fake.loads == [{"lora_name": "parley-v7", "lora_path": "/adapters/update-7"}]
    assert [body["model"] for body in fake.bodies] == ["parley-v7"] * 4  # refused, then served
    assert await ask() == CHUNKS and len(fake.loads) == 1  # loaded: no second load


async def test_an_adapter_loaded_meanwhile_by_another_process_counts_as_loaded(fake_vllm) -> None:
    fake, url = fake_vllm
    fake.adapters["parley-v8"] = "/adapters/update-8"
    assert await adapter_load(base_url=url, name="parley-v8", path="/adapters/update-8") > 0


async def test_an_adapter_load_the_server_dropped_before_answering_is_sent_again(
    fake_vllm,
) -> None:
    fake, url = fake_vllm
    fake.drop_next = True
    assert await adapter_load(base_url=url, name="parley-v5", path="/adapters/update-5") > 0
    assert len(fake.loads) == 2 and fake.adapters == {"parley-v5": "/adapters/update-5"}


async def test_without_its_folder_an_unknown_adapter_is_a_serving_error(fake_vllm) -> None:
    fake, url = fake_vllm
    with pytest.raises(ServingError) as refused:
        await anext(stream_chat([], model="parley-v9", base_url=url))
    assert refused.value.status == 404 and fake.loads == []


@pytest.mark.parametrize(
    "messages,tools",
    [
        ([{"role": "user", "content": "Hi"}], None),
        ([{"role": "user", "content": "word " * 1500}], None),
        ([{"role": "user", "content": "你好，世界。" * 300}], None),
        ([{"role": "user", "content": "Grüße 🎉 " * 400}], None),
        ([{"role": "user", "content": "\n\n\t" * 700}], None),
        (
            [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Wetter?"}]},
                {"role": "assistant", "content": "Sonnig."},
                {"role": "user", "content": "und morgen?"},
            ],
            [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        ),
    ],
)
def test_the_uncounted_bound_is_never_below_the_real_token_count(
    prepared_model, messages, tools
) -> None:
    """``fits_for_certain`` lets a prompt through uncounted only when it surely fits: its bound
    is at least the real model's token count of the rendered prompt, whatever the script."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(prepared_model)
    flat = [
        {**m, "content": " ".join(p["text"] for p in m["content"])}
        if isinstance(m["content"], list)
        else m
        for m in messages
    ]
    counted = len(tokenizer.apply_chat_template(flat, tools=tools, add_generation_prompt=True))
    params = {"tools": tools} if tools else {}
    # The window at which the bound says "fits" with nothing asked: it must not undercount.
    assert not fits_for_certain(messages, {**params, "max_tokens": 1}, counted)


async def test_a_prompt_is_counted_by_the_first_replica_that_answers(
    fake_vllm, monkeypatch
) -> None:
    fake, url = fake_vllm
    down = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setattr(replicas, "replica_order", lambda lineage: [down, url])
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    messages = [{"role": "user", "content": "one two three"}]
    assert await prompt_tokens(messages, params={"tools": tools, "max_tokens": 9}) == 8
    assert fake.bodies[-1] == {"messages": messages, "add_generation_prompt": True, "tools": tools}
    monkeypatch.setattr(replicas, "replica_order", lambda lineage: [down])
    assert await prompt_tokens(messages) is None


def test_the_doctests_hold() -> None:
    import doctest

    import webapp.inference

    assert doctest.testmod(webapp.inference).failed == 0
