"""Serving many users' adapters at once: 1 vs 8 vs 32 distinct LoRA adapters (and the base).

    python -m bench.lora_serving [--streams 32] [--rounds 2] [--max-tokens 32] [--adapters 32]

Issue 16 ("Personal models"): what does it cost vLLM to serve many people's adapters at once,
against everyone on one adapter? One vLLM is started the way Parley starts it
(``vllm_server_command``: ``--enable-lora``, rank 16, the API key, priority scheduling), with
``--max-loras`` (adapters a batch can use, held in the engine's stacked LoRA buffers) and
``--max-cpu-loras`` (adapters kept loaded in host memory) large enough for all of them. The web
app is not needed: the requests go straight to vLLM.

The adapters are made cheaply but really distinct: one rank-16 peft adapter on Parley's target
modules, then copies whose ``lora_B`` matrices are small random values from different seeds (a
fresh adapter has B = 0, which would serve the base model's answers under 32 names).

In one run, round by round in a rotating order so drift on a shared machine hits all alike,
the same ``--streams`` concurrent streams (the same prompts at temperature 0) go to: the base
model; one adapter; 8 distinct adapters; 32 distinct adapters. Reported: TTFT p50/p99, total
tokens/s, the vLLM processes' summed RSS, each against the one-adapter case (ratios are medians
of the per-round ratios). Before the rounds, adapters never loaded before are timed: the
``/v1/load_lora_adapter`` call, the first request's TTFT on it (cold) and the next one's (warm).

With the defaults a run takes 6-7 minutes on 2 shared cores (vLLM's start, then 3 rounds of
4 batches of 32 streams); ``--streams 8`` makes it about three times shorter, but then at most
8 adapters are in one batch and the 8- and 32-adapter cases differ only in how many are resident.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT, concurrent_streams, median, record, timed_stream
from bench.lora_serving_figures import (
    BASE,
    REFERENCE,
    ColdLoad,
    Round,
    adapter_name,
    cold_load_figures,
    config_figures,
    ratios,
    stream_models,
    table,
)
from bench.lora_serving_setup import Server, make_adapters, running_vllm, say
from bench.serving import PROMPTS  # the serving benchmark's prompts, for comparable figures

DEFAULT_MODEL = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"


def body(model: str, prompt: str, max_tokens: int, *, stream: bool = True) -> dict[str, Any]:
    request = {
        "model": model,
        "stream": stream,
        "temperature": 0,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": prompt}],
    }
    if stream:
        request["stream_options"] = {"include_usage": True}
    return request


async def load_adapter(client: httpx.AsyncClient, server: Server, name: str, path: Path) -> float:
    """POST /v1/load_lora_adapter; returns the call's milliseconds."""
    started = time.perf_counter()
    response = await client.post(
        server.url.removesuffix("/v1") + "/v1/load_lora_adapter",
        json={"lora_name": name, "lora_path": str(path)},
        headers=server.headers,
    )
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000


async def cold_load(
    client: httpx.AsyncClient, server: Server, name: str, path: Path, max_tokens: int
) -> ColdLoad:
    rss_before = server.rss_mb()
    load_ms = await load_adapter(client, server, name, path)
    url = server.url + "/chat/completions"
    cold = await timed_stream(client, url, body(name, PROMPTS[0], max_tokens), server.headers)
    warm = await timed_stream(client, url, body(name, PROMPTS[0], max_tokens), server.headers)
    return ColdLoad(load_ms, cold.ttft_s * 1000, warm.ttft_s * 1000, server.rss_mb() - rss_before)


async def distinct_answers(server: Server, names: list[str], max_tokens: int) -> int:
    """How many different answers the base and the adapters give to one prompt at temperature 0."""
    url = server.url + "/chat/completions"
    async with httpx.AsyncClient(timeout=600, headers=server.headers) as client:
        answers = await asyncio.gather(
            *(client.post(url, json=body(n, PROMPTS[2], max_tokens, stream=False)) for n in names)
        )
    for answer in answers:
        if answer.status_code != 200:
            raise RuntimeError(f"vLLM answered {answer.status_code}: {answer.text[:500]}")
    return len({a.json()["choices"][0]["message"]["content"] for a in answers})


async def run(server: Server, folders: list[Path], args: argparse.Namespace) -> dict[str, Any]:
    configs = list(dict.fromkeys([BASE, REFERENCE, "8", str(args.adapters)]))
    memory = {"started": server.rss_mb()}
    async with httpx.AsyncClient(timeout=600) as client:
        # A first request on the base, so the cold loads below are not its warm-up.
        await timed_stream(
            client, server.url + "/chat/completions", body(BASE, PROMPTS[0], 4), server.headers
        )
        memory["base_warm"] = server.rss_mb()
        say(f"timing {args.cold_loads} cold adapter loads")
        cold = [
            await cold_load(
                client, server, f"cold-{i}", folders[args.adapters + i], args.max_tokens
            )
            for i in range(args.cold_loads)
        ]
        memory["after_cold_loads"] = server.rss_mb()
        say(f"loading the {args.adapters} serving adapters")
        load_ms = [
            await load_adapter(client, server, adapter_name(i), folders[i])
            for i in range(args.adapters)
        ]
        memory[f"after_loading_{args.adapters}"] = server.rss_mb()
    names = [BASE] + [adapter_name(i) for i in range(args.adapters)]
    distinct = await distinct_answers(server, names, max_tokens=args.max_tokens)
    say(f"{distinct} distinct answers from the base and {args.adapters} adapters (same prompt)")
    memory[f"after_using_{args.adapters}"] = server.rss_mb()

    results: dict[str, list[Round]] = {c: [] for c in configs}
    started = time.perf_counter()
    for round_index in range(args.rounds + 1):  # round 0 warms every configuration up
        shift = round_index % len(configs)
        for config in configs[shift:] + configs[:shift]:  # a rotating order: no fixed position
            bodies = [
                body(model, PROMPTS[(round_index + i) % len(PROMPTS)], args.max_tokens)
                for i, model in enumerate(stream_models(config, args.streams))
            ]
            await asyncio.sleep(args.pause)
            timings, wall = await concurrent_streams(
                server.url + "/chat/completions", bodies, server.headers
            )
            if round_index > 0:
                results[config].append(
                    Round(
                        ttfts_ms=[t.ttft_s * 1000 for t in timings],
                        tokens=sum(t.tokens for t in timings),
                        wall_s=wall,
                        rss_mb=server.rss_mb(),
                    )
                )
        label = "warm-up round" if round_index == 0 else f"round {round_index}/{args.rounds}"
        say(f"{label} done, {time.perf_counter() - started:.0f} s")
    return {
        "results": results,
        "cold": cold,
        "load_ms": load_ms,
        "memory": memory,
        "distinct_answers": distinct,
    }


def report(outcome: dict[str, Any], args: argparse.Namespace, started_s: float) -> None:
    results: dict[str, list[Round]] = outcome["results"]
    memory, cold = outcome["memory"], cold_load_figures(outcome["cold"])
    per_adapter = (
        memory[f"after_loading_{args.adapters}"] - memory["after_cold_loads"]
    ) / args.adapters
    figures = {
        "configs": {
            name: {**config_figures(rounds), "vs_1_adapter": ratios(rounds, results[REFERENCE])}
            for name, rounds in results.items()
        },
        "cold_load": cold,
        "serving_adapter_load_ms_median": median(outcome["load_ms"]),
        "memory_mb": memory,
        "rss_mb_per_loaded_adapter": per_adapter,
        "distinct_answers": outcome["distinct_answers"],
        "vllm_start_s": started_s,
        "streams": args.streams,
        "rounds": args.rounds,
        "max_tokens": args.max_tokens,
        "adapters": args.adapters,
        "max_loras": args.adapters,
        "max_cpu_loras": args.adapters + args.cold_loads,
    }
    record("lora-serving", figures)
    print()
    print(table(results, args.streams))
    print()
    print(
        f"adapter never loaded before ({cold['count']}): load call {cold['load_ms_median']:.0f} ms"
        f" (max {cold['load_ms_max']:.0f}), first request TTFT {cold['cold_ttft_ms_median']:.0f}"
        f" ms vs {cold['warm_ttft_ms_median']:.0f} ms warm ({cold['cold_over_warm_ttft']:.2f}×)"
    )
    print(
        f"memory: vLLM RSS {memory['started']:.0f} MB at start, "
        f"{memory[f'after_loading_{args.adapters}']:.0f} MB with {args.adapters} adapters loaded"
        f" ({per_adapter:.1f} MB per adapter), {memory[f'after_using_{args.adapters}']:.0f} MB"
        f" after serving them all"
    )
    print(
        f"{outcome['distinct_answers']} distinct answers from the base and {args.adapters} "
        f"adapters to one prompt"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--streams", type=int, default=32, help="concurrent streams per batch")
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds (+1 warm-up)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--adapters", type=int, default=32, help="the many-users configuration")
    parser.add_argument("--cold-loads", type=int, default=3, help="adapters loaded cold, timed")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds idle before a batch")
    parser.add_argument("--start-timeout", type=float, default=900)
    args = parser.parse_args(argv)
    if args.adapters < 8:
        parser.error("--adapters must be at least 8 (the 8-adapter configuration)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="parley-lora-bench-"))
    say(f"making {args.adapters + args.cold_loads} distinct adapters in {scratch}")
    folders = make_adapters(args.model_dir, scratch, args.adapters + args.cold_loads)
    with running_vllm(
        args.model_dir,
        max_loras=args.adapters,
        max_cpu_loras=args.adapters + args.cold_loads,
        log_path=scratch / "vllm.log",
        timeout_s=args.start_timeout,
    ) as server:
        outcome = asyncio.run(run(server, folders, args))
        report(outcome, args, server.started_s)
    shutil.rmtree(scratch)  # kept when the run fails: vLLM's log is in it
    return 0


if __name__ == "__main__":
    sys.exit(main())
