"""Serving that keeps up: each person's adapter on their home replica, loaded when they come.

    python -m bench.serving_residency [--replicas 2] [--people 8] [--versions 2]

Starts ``--replicas`` vLLM servers the way Parley starts them (``bench.lora_serving_setup``,
one API key for all), makes distinct rank-16 adapters, and drives Parley's own serving code
against them, with no database: each person's versions are published with the publishing
workflow's ``adapter_load_home`` (the real push, to the lineage's home), their requests go
through ``webapp.inference.stream_chat`` with their lineage key, and retired versions are
unloaded with ``trainer.publish.unload`` (what the periodic sweep calls). For each person and
version, one after another:

- *after publish*: their first request, on their home, where publishing loaded the adapter
  (every person's version is published first, then each is asked);
- *warm*: their next request there.

Then the adapters each replica holds (``GET /v1/models``), before and after the retired
versions are unloaded, against what loading every version into every replica would hold
(people × versions each). Then, for each person's live version, *cold*: a request while their
home is taken as down, so it falls back to the next replica of their order, which does not
have the adapter yet: the 404, the load and the first token, then their next request there
(warm, the pair's difference being what a cold load costs). Last, the memory of one resident
adapter from its shape (rank × Σ(in + out) of the targets × layers × 4 bytes), beside the RSS
the publishing loads added (measured around them, before any request on the new adapters).

Two replicas of SmolLM2-135M on 2 shared cores start in about 2 minutes; the rest takes
well under a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, median, record

DEFAULT_MODEL = (
    Path(os.environ.get("PARLEY_MODELS_DIR") or ROOT / "var" / "models") / "SmolLM2-135M-Instruct"
)


def say(message: str) -> None:
    print(f"serving_residency | {message}", flush=True)


async def ttft_ms(
    name: str, path: Path, *, lineage: str, max_tokens: int, base_url: str | None = None
) -> float:
    """Milliseconds to the first chunk with content, through Parley's client."""
    from webapp.inference import stream_chat

    started = time.perf_counter()
    stream = stream_chat(
        [{"role": "user", "content": "Name a colour."}],
        model=name,
        params={"max_tokens": max_tokens, "temperature": 0},
        adapter_path=str(path),
        lineage=lineage,
        base_url=base_url,
    )
    try:
        async for chunk in stream:
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                return (time.perf_counter() - started) * 1000
    finally:
        await stream.aclose()
    raise RuntimeError(f"no token from {name}")


def adapter_estimate_mib(model_dir: Path, *, rank: int, targets: tuple[str, ...]) -> float:
    """One adapter's weights in vLLM, from its shape: fp32 on the CPU build."""
    from transformers import AutoConfig

    from trainer.gpu_memory import ModelShape, lora_parameters

    shape = ModelShape.from_config(AutoConfig.from_pretrained(str(model_dir)))
    return lora_parameters(shape, rank, targets) * 4 / 2**20


async def drive(servers: list[Any], folders: list[Path], args: argparse.Namespace) -> dict:
    from trainer import publish
    from webapp import replicas
    from webapp.learning.models import PolicyVersion
    from webapp.learning.workflows.publishing import adapter_load_home

    urls = [server.url for server in servers]
    key = servers[0].headers["Authorization"].removeprefix("Bearer ")

    def resident() -> list[int]:
        return [len(publish.loaded_adapters(url, api_key=key)) for url in urls]

    timings: dict[str, list[float]] = {
        kind: [] for kind in ("after_publish", "warm", "cold", "warm_on_fallback")
    }
    live: dict[int, PolicyVersion] = {}
    rss_added = 0.0
    for round_index in range(args.versions):
        rss_before = sum(server.rss_mb() for server in servers)
        for person in range(1, args.people + 1):
            number = round_index * args.people + person
            live[person] = PolicyVersion(
                number=number, owner_id=person, adapter_path=str(folders[number - 1])
            )
            adapter_load_home(version=live[person], push=publish.push)
        rss_added += sum(server.rss_mb() for server in servers) - rss_before
        for person, version in live.items():
            for kind in ("after_publish", "warm"):
                timings[kind].append(
                    await ttft_ms(
                        version.served_name("parley"),
                        Path(version.adapter_path),
                        lineage=replicas.lineage_key(person),
                        max_tokens=args.max_tokens,
                    )
                )
        say(f"version {round_index + 1} of {args.people} people published and asked")
    resident_after_use = resident()
    live_names = {version.served_name("parley") for version in live.values()}
    unload_ms = []
    for url in urls:
        for name in publish.loaded_adapters(url, api_key=key):
            if name not in live_names:
                started = time.perf_counter()
                publish.unload(name, serving_url=url, api_key=key)
                unload_ms.append((time.perf_counter() - started) * 1000)
    resident_live = resident()
    for person, version in live.items():
        lineage = replicas.lineage_key(person)
        replicas.down.mark(replicas.rendezvous_order(lineage, urls)[0])  # its home is down
        for kind in ("cold", "warm_on_fallback"):  # a pair on one replica: drift cancels out
            timings[kind].append(
                await ttft_ms(
                    version.served_name("parley"),
                    Path(version.adapter_path),
                    lineage=lineage,
                    max_tokens=args.max_tokens,
                )
            )
        replicas.down = replicas.DownReplicas(for_s=replicas.DOWN_FOR_S)
    say(f"{args.people} people asked on their fallback replica")
    homes = [
        sum(
            replicas.rendezvous_order(replicas.lineage_key(p), urls)[0] == url
            for p in range(1, args.people + 1)
        )
        for url in urls
    ]
    return {
        "ttft_ms": {kind: median(values) for kind, values in timings.items()},
        "cold_minus_warm_ms": median(
            [c - w for c, w in zip(timings["cold"], timings["warm_on_fallback"], strict=True)]
        ),
        "ttft_ms_all": timings,
        "homes": homes,
        "resident_after_use": resident_after_use,
        "resident_live_only": resident_live,
        "resident_after_fallback": resident(),
        "resident_if_every_replica": args.people * args.versions,
        "unload_ms_median": median(unload_ms),
        "rss_mb_per_loaded_adapter": rss_added / len(folders),
        "adapter_mib_estimate": adapter_estimate_mib(
            args.model_dir, rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj")
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--people", type=int, default=8)
    parser.add_argument("--versions", type=int, default=2, help="published per person")
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--start-timeout", type=float, default=900)
    args = parser.parse_args(argv)

    from bench.lora_serving_setup import make_adapters, running_vllm

    work = Path(tempfile.mkdtemp(prefix="parley-residency-"))
    say(f"making {args.people * args.versions} adapters in {work}")
    folders = make_adapters(args.model_dir, work / "adapters", args.people * args.versions)
    key = secrets.token_urlsafe(32)
    slots = args.people * args.versions
    with contextlib.ExitStack() as stack:
        servers = []
        for index in range(args.replicas):
            servers.append(
                stack.enter_context(
                    running_vllm(
                        args.model_dir,
                        max_loras=4,
                        max_cpu_loras=slots,
                        log_path=work / f"vllm-{index}.log",
                        timeout_s=args.start_timeout,
                        api_key=key,
                    )
                )
            )
        # Parley's settings, read by its serving code in this process (no database is used).
        os.environ["PARLEY_VAR_DIR"] = str(work / "var")
        import django
        from django.conf import settings

        django.setup()
        settings.VLLM_BASE_URLS = [server.url for server in servers]
        settings.VLLM_API_KEY = key
        figures = asyncio.run(drive(servers, folders, args))
    report(figures, args)


def report(figures: dict, args: argparse.Namespace) -> None:
    ttft = figures["ttft_ms"]
    record(
        "serving-residency",
        {key: value for key, value in figures.items() if key != "ttft_ms_all"}
        | {"replicas": args.replicas, "people": args.people, "versions": args.versions},
    )
    print()
    print(
        f"TTFT medians over {args.people} people × {args.versions} versions: first request "
        f"after publish {ttft['after_publish']:.0f} ms, warm {ttft['warm']:.0f} ms on the home"
    )
    print(
        f"cold, on the fallback replica (404, load, first token), {args.people} live versions: "
        f"{ttft['cold']:.0f} ms against {ttft['warm_on_fallback']:.0f} ms for the next request "
        f"there; cold − warm per pair, median {figures['cold_minus_warm_ms']:.0f} ms"
    )
    print(
        f"homes per replica: {figures['homes']}; adapters resident per replica after use: "
        f"{figures['resident_after_use']}, after unloading retired versions: "
        f"{figures['resident_live_only']}, after every person fell back once: "
        f"{figures['resident_after_fallback']} (every version into every replica: "
        f"{figures['resident_if_every_replica']} each); unload call "
        f"{figures['unload_ms_median']:.0f} ms"
    )
    print(
        f"memory per resident adapter: {figures['adapter_mib_estimate']:.1f} MiB from its shape "
        f"(rank 16, q/k/v/o, fp32), {figures['rss_mb_per_loaded_adapter']:.1f} MB of RSS "
        f"added per load"
    )


if __name__ == "__main__":
    main()
