"""The llama.cpp engine on the real model, behind vLLM's routes: Parley's own client streams
from it, its log-probs with a person's adapter agree with the trainer's, adapters come and go
at run time, and what it cannot do it refuses in words."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.launching import free_port
from tests.helpers import ROOT

pytest.importorskip("llama_cpp")

KEY = "engine-test-key"
GGUF = ROOT / "var" / "cache" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MESSAGES = [{"role": "user", "content": "Name three colours of the rainbow."}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ROME = [{"role": "user", "content": "What is the weather in Rome?"}]


class Engine:
    def __init__(self, url: str, adapter: Path) -> None:
        self.url = url
        self.adapter = adapter
        self.client = httpx.Client(
            base_url=url, timeout=120, headers={"Authorization": f"Bearer {KEY}"}
        )

    def chat(self, **body: object) -> httpx.Response:
        return self.client.post("/v1/chat/completions", json={"model": "base", **body})


def _adapter(model_dir: Path, folder: Path) -> Path:
    """A LoRA on q/k/v/o with random non-zero weights on both sides: a clearly other model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    config = LoraConfig(
        r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    peft_model = get_peft_model(model, config)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.08)
    peft_model.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def engine(prepared_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    adapter = _adapter(prepared_model, tmp_path_factory.mktemp("adapter") / "person")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "webapp.infra.llamacpp_server"),
            *("--gguf", str(GGUF), "--tokenizer", str(prepared_model)),
            *("--port", str(port), "--max-model-len", "2048", "--slots", "4"),
        ],
        cwd=ROOT,
        env={**os.environ, "VLLM_API_KEY": KEY},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.3)
        else:
            raise AssertionError("the llama.cpp engine did not start in 120 s")
        yield Engine(url, adapter)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _stream(engine: Engine, **body: object) -> list[dict]:
    import json

    chunks = []
    with engine.client.stream(
        "POST", "/v1/chat/completions", json={"model": "base", "stream": True, **body}
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
            elif line == "data: [DONE]":
                chunks.append({"done": True})
    return chunks


def test_parleys_client_streams_tokens_ids_and_log_probs(engine: Engine, settings) -> None:
    from transformers import AutoTokenizer

    from webapp.inference import CompletionAccumulator, stream_chat

    settings.VLLM_API_KEY = KEY

    async def run() -> tuple[CompletionAccumulator, int]:
        accumulator, chunks = CompletionAccumulator(), 0
        params = {"max_tokens": 24, "temperature": 0.7, "seed": 3}
        async for chunk in stream_chat(
            MESSAGES, model="base", params=params, base_url=engine.url + "/v1"
        ):
            accumulator.add(chunk)
            chunks += 1
        return accumulator, chunks

    accumulator, chunks = asyncio.run(run())
    choice = accumulator.choice(0)
    tokenizer = AutoTokenizer.from_pretrained(
        str(GGUF.parent.parent / "models" / "SmolLM2-135M-Instruct")
    )
    text = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert accumulator.prompt_token_ids == tokenizer.encode(text, add_special_tokens=False)
    assert chunks >= len(choice.token_ids) > 0  # one chunk per token: a real stream
    assert len(choice.token_logprobs) == len(choice.token_ids)
    assert all(lp <= 0 for lp in choice.token_logprobs)
    assert choice.content == tokenizer.decode(choice.token_ids, skip_special_tokens=True)
    assert choice.finish_reason in ("stop", "length")
    assert accumulator.usage["completion_tokens"] == len(choice.token_ids)


def test_log_probs_with_an_adapter_agree_with_the_trainers(engine: Engine) -> None:
    """The training signal: llama.cpp's log-prob of each token it sampled with a person's
    adapter, against peft's on the fp32 weights (the trainer's model)."""
    load = engine.client.post(
        "/v1/load_lora_adapter", json={"lora_name": "person", "lora_path": str(engine.adapter)}
    )
    assert load.status_code == 200, load.text
    body = {"max_tokens": 32, "temperature": 0, "logprobs": True, "return_token_ids": True}
    adapted = engine.chat(messages=MESSAGES, **{**body, "model": "person"}).json()
    base = engine.chat(messages=MESSAGES, **body).json()
    assert adapted["choices"][0]["message"]["content"] != base["choices"][0]["message"]["content"]

    gap, effect = _gap_to_trainer(adapted, engine.adapter)
    base_gap, _ = _gap_to_trainer(base, None)
    print(
        f"mean |served - trainer|: {gap:.4f} with the adapter, {base_gap:.4f} without; "
        f"the adapter's own effect {effect:.4f}"
    )
    # llama.cpp runs the Q4_1 weights with 8-bit activations, the trainer their fp32 values:
    # the adapter adds no gap of its own to that, and is far larger than it.
    assert gap < base_gap * 1.5 + 0.02
    assert effect > 5 * gap


def _gap_to_trainer(answer: dict, adapter: Path | None) -> tuple[float, float]:
    """Mean |served − trainer| log-prob over the answer's tokens, and the mean |with − without
    adapter| of the trainer's own (0 without one)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model_dir = GGUF.parent.parent / "models" / "SmolLM2-135M-Instruct"
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    ids = answer["choices"][0]["token_ids"]
    served = torch.tensor([item["logprob"] for item in answer["choices"][0]["logprobs"]["content"]])
    prompt = answer["prompt_token_ids"]
    sequence = torch.tensor([prompt + ids])
    targets = torch.tensor(ids)[:, None]

    def logprobs(network: torch.nn.Module) -> torch.Tensor:
        with torch.no_grad():
            logits = network(sequence).logits[0, len(prompt) - 1 : -1]
        return torch.log_softmax(logits, -1).gather(1, targets)[:, 0]

    without = logprobs(model)
    if adapter is None:
        return (served - without).abs().mean().item(), 0.0
    with_adapter = logprobs(PeftModel.from_pretrained(model, str(adapter)).eval())
    return (served - with_adapter).abs().mean().item(), (with_adapter - without).abs().mean().item()


def test_adapters_load_list_refuse_twice_and_unload(engine: Engine) -> None:
    missing = engine.chat(messages=MESSAGES, model="nobody", max_tokens=4)
    assert missing.status_code == 404 and "does not exist" in missing.json()["error"]["message"]
    path = str(engine.adapter)
    first = engine.client.post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": path})
    assert first.status_code == 200
    again = engine.client.post("/v1/load_lora_adapter", json={"lora_name": "x", "lora_path": path})
    assert again.status_code == 400 and "already" in again.text
    inplace = {"lora_name": "x", "lora_path": path, "load_inplace": True}
    assert engine.client.post("/v1/load_lora_adapter", json=inplace).status_code == 200
    listed = {m["id"]: m for m in engine.client.get("/v1/models").json()["data"]}
    assert listed["x"]["parent"] == "base" and listed["x"]["root"] == path
    assert engine.chat(messages=MESSAGES, model="x", max_tokens=4).status_code == 200
    assert engine.client.post("/v1/unload_lora_adapter", json={"lora_name": "x"}).status_code == 200
    assert engine.chat(messages=MESSAGES, model="x", max_tokens=4).status_code == 404
    gone = engine.client.post("/v1/unload_lora_adapter", json={"lora_name": "x"})
    assert gone.status_code == 404
    bad = {"lora_name": "y", "lora_path": "/nonexistent"}
    assert engine.client.post("/v1/load_lora_adapter", json=bad).status_code == 400


def test_choices_stops_lengths_and_usage(engine: Engine) -> None:
    chunks = _stream(
        engine,
        messages=MESSAGES,
        n=2,
        max_tokens=12,
        temperature=1.0,
        seed=5,
        stream_options={"include_usage": True},
        return_token_ids=True,
    )
    assert chunks[-1] == {"done": True}
    usage = chunks[-2]["usage"]
    ids = {0: [], 1: []}
    finishes = {}
    for chunk in chunks[:-2]:
        for choice in chunk["choices"]:
            ids[choice["index"]] += choice.get("token_ids") or []
            if choice.get("finish_reason"):
                finishes[choice["index"]] = choice["finish_reason"]
    assert set(finishes) == {0, 1}
    assert usage["completion_tokens"] == len(ids[0]) + len(ids[1])
    assert all(len(ids[i]) <= 12 for i in ids)
    whole = engine.chat(messages=MESSAGES, max_tokens=40, temperature=0).json()
    text = whole["choices"][0]["message"]["content"]
    word = text.split()[2]
    cut = engine.chat(messages=MESSAGES, max_tokens=40, temperature=0, stop=[word]).json()
    assert cut["choices"][0]["finish_reason"] == "stop"
    assert cut["choices"][0]["message"]["content"] == text[: text.index(word)]
    short = engine.chat(messages=MESSAGES, max_tokens=3, temperature=0, ignore_eos=True).json()
    assert short["choices"][0]["finish_reason"] == "length"
    assert short["usage"]["completion_tokens"] == 3


def test_refusals_speak_openais_error_format(engine: Engine) -> None:
    anonymous = httpx.get(engine.url + "/v1/models")
    assert anonymous.status_code == 401
    long = [{"role": "user", "content": "word " * 2100}]
    overflow = engine.chat(messages=long, max_tokens=10)
    assert overflow.status_code == 400
    assert "maximum context length is 2048 tokens" in overflow.json()["error"]["message"]
    counted = engine.client.post(
        "/tokenize", json={"messages": long, "add_generation_prompt": True}
    )
    assert counted.json()["count"] > 2048
    regex = engine.chat(messages=MESSAGES, guided_regex="[a-z]+")
    assert regex.status_code == 400 and "not supported" in regex.json()["error"]["message"]
    unknown = {"type": "function", "function": {"name": "nowhere"}}
    named = engine.chat(messages=MESSAGES, tools=[WEATHER], tool_choice=unknown)
    assert named.status_code == 400 and "nowhere" in named.json()["error"]["message"]
    assert engine.client.post("/v1/chat/completions", content=b"{").status_code == 400


def test_a_guided_choice_answers_one_of_the_choices(engine: Engine) -> None:
    """The LLM judge's constrained votes (vLLM's ``structured_outputs.choice``)."""
    boxes = ["\\boxed{1}", "\\boxed{-1}", "\\boxed{0}"]
    answer = engine.chat(
        messages=[{"role": "user", "content": "Was this answer good? Say \\boxed{1} or not."}],
        n=3,
        temperature=1.0,
        max_tokens=20,
        structured_outputs={"choice": boxes},
    ).json()
    texts = [choice["message"]["content"] for choice in answer["choices"]]
    assert len(texts) == 3 and set(texts) <= set(boxes), texts


def test_guided_json_and_tool_calls_follow_their_schema(engine: Engine) -> None:
    import json

    schema = {
        "type": "object",
        "properties": {
            "colour": {"type": "string", "maxLength": 12},
            "count": {"type": "integer"},
        },
        "required": ["colour", "count"],
    }
    answer = engine.chat(
        messages=MESSAGES,
        max_tokens=80,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
    ).json()
    value = json.loads(answer["choices"][0]["message"]["content"])
    assert isinstance(value["colour"], str) and isinstance(value["count"], int)

    required = engine.chat(
        messages=ROME, tools=[WEATHER], tool_choice="required", max_tokens=80, temperature=0
    ).json()["choices"][0]
    assert required["finish_reason"] == "tool_calls"
    call = required["message"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather" and call["id"]
    assert isinstance(json.loads(call["function"]["arguments"])["city"], str)

    chunks = _stream(
        engine,
        messages=ROME,
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=80,
        temperature=0,
    )
    deltas = [
        delta
        for chunk in chunks[:-1]
        for choice in chunk["choices"]
        for delta in choice["delta"].get("tool_calls") or []
    ]
    assert [d["function"]["name"] for d in deltas] == ["get_weather"]
    assert "city" in json.loads(deltas[0]["function"]["arguments"])


def test_what_a_client_may_send_wrongly_gets_an_openai_error(engine: Engine) -> None:
    long = [{"role": "user", "content": "word " * 2100}]
    unbounded = engine.chat(messages=long)  # no max_tokens: the prompt alone is too long
    assert unbounded.status_code == 400
    assert "However, your prompt contains" in unbounded.json()["error"]["message"]
    wrong = engine.chat(messages=MESSAGES, n="two", max_tokens=4)
    assert wrong.status_code == 400 and wrong.json()["error"]["message"]
    assert engine.chat(messages=MESSAGES, seed=-5, max_tokens=4, temperature=1.0).status_code == 200


def test_a_stop_string_keeps_the_text_before_it_in_the_stream(engine: Engine) -> None:
    body = {"messages": MESSAGES, "max_tokens": 40, "temperature": 0}
    text = engine.chat(**body).json()["choices"][0]["message"]["content"]
    stop = text.split()[3]
    chunks = _stream(engine, **body, stop=[stop])
    streamed = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1] if c.get("choices")
    )
    assert streamed == text[: text.index(stop)]
