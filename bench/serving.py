"""Serving through Parley's /v1 API vs. straight to vLLM: TTFT and tokens/s, 1 and 8 streams.

    python -m bench.serving [--rounds 16] [--max-tokens 64] [--pause 1]

The paths get the same prompts at temperature 0 in alternating rounds of one run, so drift on
a shared machine hits them alike; the added TTFT is the median of the per-round differences.
Each round starts after a pause on an idle machine: back to back, the tail of one path's round
(vLLM and the web server still winding down on 2 cores) fell on whichever path came next.
Targets: at most 5% throughput lost, at most 30 ms added TTFT.

A third path, ``vllm+rec``, goes straight to vLLM but asks for what Parley records for training
(the sampled token ids and their log-probs). Parley vs. it is the web layer's own cost; it vs.
plain vLLM is the engine's cost of producing the training data.
"""

from __future__ import annotations

import argparse
import asyncio

from bench.common import concurrent_streams, median, percentile, record, running_system

PROMPTS = [
    "Explain what a hash map is in two sentences.",
    "Give me three tips for writing clear emails.",
    "What causes the seasons on Earth?",
    "Describe a cat to someone who has never seen one.",
    "Why is the sky blue? Answer briefly.",
    "List four fruits that are red.",
    "What is the difference between a list and a tuple in Python?",
    "Write a haiku about the sea.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds idle before a round")
    args = parser.parse_args()
    with running_system() as system:
        asyncio.run(run(system, rounds=args.rounds, max_tokens=args.max_tokens, pause_s=args.pause))


async def run(system, *, rounds: int, max_tokens: int, pause_s: float) -> None:  # noqa: ANN001
    recording = {
        "logprobs": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": False},
    }
    paths = {
        "vllm": (system.vllm_url + "/chat/completions", "base", system.vllm_headers, {}),
        "vllm+rec": (system.vllm_url + "/chat/completions", "base", system.vllm_headers, recording),
        "parley": (
            system.web_url + "/v1/chat/completions",
            "parley",
            {"Authorization": f"Bearer {system.api_key}"},
            {},
        ),
    }
    figures: dict[str, dict[str, float]] = {}
    # Per round and path: the median TTFT of the round's streams, and its tokens/s.
    rounds_ttft: dict[str, list[float]] = {}
    rounds_tps: dict[str, list[float]] = {}
    for concurrency in (1, 8):
        ttfts: dict[str, list[float]] = {p: [] for p in paths}
        for round_index in range(rounds + 1):  # round 0 warms every path up and is discarded
            for name, (url, model, headers, extra) in paths.items():
                bodies = [
                    {
                        "model": model,
                        "stream": True,
                        "temperature": 0,
                        "max_tokens": max_tokens,
                        "stream_options": {"include_usage": True},
                        "messages": [
                            {"role": "user", "content": PROMPTS[(round_index + i) % len(PROMPTS)]}
                        ],
                        **extra,
                    }
                    for i in range(concurrency)
                ]
                await asyncio.sleep(pause_s)
                timings, wall = await concurrent_streams(url, bodies, headers)
                if round_index == 0:
                    continue
                key = f"{name}_c{concurrency}"
                ttfts[name] += [t.ttft_s * 1000 for t in timings]
                rounds_ttft.setdefault(key, []).append(median([t.ttft_s * 1000 for t in timings]))
                rounds_tps.setdefault(key, []).append(sum(t.tokens for t in timings) / wall)
        for name in paths:
            key = f"{name}_c{concurrency}"
            figures[key] = {
                "ttft_median_ms": median(ttfts[name]),
                "ttft_p95_ms": percentile(ttfts[name], 0.95),
                "tokens_per_s": median(rounds_tps[key]),
            }
    print()
    print(f"{'path':<10}{'streams':>8}{'TTFT p50 ms':>13}{'TTFT p95 ms':>13}{'tok/s':>9}")
    summary: dict[str, float] = {}
    for concurrency in (1, 8):
        for name in paths:
            f = figures[f"{name}_c{concurrency}"]
            print(
                f"{name:<10}{concurrency:>8}{f['ttft_median_ms']:>13.1f}{f['ttft_p95_ms']:>13.1f}"
                f"{f['tokens_per_s']:>9.1f}"
            )

        def added(a: str, b: str, c: int = concurrency) -> float:
            """Median over rounds of (a's round TTFT - b's round TTFT): drift cancels out."""
            pairs = zip(rounds_ttft[f"{a}_c{c}"], rounds_ttft[f"{b}_c{c}"], strict=True)
            return median([x - y for x, y in pairs])

        total, engine, web = (
            added("parley", "vllm"),
            added("vllm+rec", "vllm"),
            added("parley", "vllm+rec"),
        )
        ratio = median(
            [
                p / d
                for p, d in zip(
                    rounds_tps[f"parley_c{concurrency}"],
                    rounds_tps[f"vllm_c{concurrency}"],
                    strict=True,
                )
            ]
        )
        summary[f"c{concurrency}_added_ttft_ms"] = total
        summary[f"c{concurrency}_engine_recording_ttft_ms"] = engine
        summary[f"c{concurrency}_web_layer_ttft_ms"] = web
        summary[f"c{concurrency}_throughput_ratio"] = ratio
        print(
            f"  {concurrency} stream(s): Parley adds {total:+.1f} ms TTFT (target ≤ 30): "
            f"{engine:+.1f} ms the engine producing token ids and log-probs, {web:+.1f} ms the "
            f"web layer; throughput ratio {ratio:.3f} (target ≥ 0.95)"
        )
    record(
        "serving",
        {
            "figures": figures,
            "summary": summary,
            "rounds": rounds,
            "max_tokens": max_tokens,
            "pause_s": pause_s,
        },
    )


if __name__ == "__main__":
    main()
