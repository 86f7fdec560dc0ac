"""Serving through Parley's /v1 API vs. straight to vLLM: TTFT and tokens/s, 1 and 8 streams.

    python -m bench.serving [--rounds 3] [--max-tokens 64]

Both paths get the same prompts at temperature 0 in alternating rounds of one run, so drift on
a shared machine hits both alike. Targets: at most 5% throughput lost, at most 30 ms added TTFT.
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    with running_system() as system:
        asyncio.run(run(system, rounds=args.rounds, max_tokens=args.max_tokens))


async def run(system, *, rounds: int, max_tokens: int) -> None:  # noqa: ANN001
    paths = {
        "vllm": (system.vllm_url + "/chat/completions", "base", {}),
        "parley": (
            system.web_url + "/v1/chat/completions",
            "parley",
            {"Authorization": f"Bearer {system.api_key}"},
        ),
    }
    figures: dict[str, dict[str, float]] = {}
    for concurrency in (1, 8):
        samples: dict[str, dict[str, list[float]]] = {p: {"ttft": [], "tps": []} for p in paths}
        for round_index in range(rounds + 1):  # round 0 warms both paths up and is discarded
            for name, (url, model, headers) in paths.items():
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
                    }
                    for i in range(concurrency)
                ]
                timings, wall = await concurrent_streams(url, bodies, headers)
                if round_index == 0:
                    continue
                samples[name]["ttft"] += [t.ttft_s for t in timings]
                samples[name]["tps"].append(sum(t.tokens for t in timings) / wall)
        for name in paths:
            figures[f"{name}_c{concurrency}"] = {
                "ttft_median_ms": median(samples[name]["ttft"]) * 1000,
                "ttft_p95_ms": percentile(samples[name]["ttft"], 0.95) * 1000,
                "tokens_per_s": median(samples[name]["tps"]),
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
        direct, parley = figures[f"vllm_c{concurrency}"], figures[f"parley_c{concurrency}"]
        added = parley["ttft_median_ms"] - direct["ttft_median_ms"]
        ratio = parley["tokens_per_s"] / direct["tokens_per_s"]
        summary[f"c{concurrency}_added_ttft_ms"] = added
        summary[f"c{concurrency}_throughput_ratio"] = ratio
        print(
            f"  {concurrency} stream(s): Parley adds {added:+.1f} ms TTFT (target ≤ 30), "
            f"throughput ratio {ratio:.3f} (target ≥ 0.95)"
        )
    record(
        "serving",
        {"figures": figures, "summary": summary, "rounds": rounds, "max_tokens": max_tokens},
    )


if __name__ == "__main__":
    main()
