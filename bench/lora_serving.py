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
import contextlib
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    ROOT,
    concurrent_streams,
    median,
    percentile,
    record,
    stop_process_group,
    timed_stream,
)
from bench.serving import PROMPTS  # the serving benchmark's prompts, for comparable figures

DEFAULT_MODEL = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
BASE = "base"
REFERENCE = "1"  # the configuration every ratio is taken against: everyone on one adapter


def say(message: str) -> None:
    print(f"lora_serving | {message}", flush=True)


def adapter_name(index: int) -> str:
    return f"user-{index:02d}"


def make_adapters(
    base_model_dir: str | Path, out_dir: str | Path, count: int, *, scale: float = 0.08
) -> list[Path]:
    """``count`` distinct LoRA adapter folders for the base model, as Parley's trainer saves them.

    One adapter is created with peft at ``UpdateConfig``'s rank and target modules (A random,
    B zero), then copied ``count`` times with every ``lora_B`` replaced by N(0, scale²) values
    from the copy's own seed, so each adapter changes the model's output, and differently.
    At 0.02 the base model's greedy answers came back unchanged; at 0.05-0.1 they differ from
    the base's and from each other's and stay fluent.
    """
    import torch
    from safetensors.torch import load_file, save_file

    from trainer.config import UpdateConfig
    from trainer.policy import load_policy, save_adapter

    out = Path(out_dir)
    template = save_adapter(
        load_policy(base_model_dir, UpdateConfig(), device="cpu"), out / "template"
    )
    weights = load_file(str(template / "adapter_model.safetensors"))
    folders = []
    for index in range(count):
        generator = torch.Generator().manual_seed(1000 + index)
        copy = {
            name: torch.randn(tensor.shape, generator=generator) * scale
            if "lora_B" in name
            else tensor.contiguous()
            for name, tensor in weights.items()
        }
        folder = out / adapter_name(index)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(copy, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
        shutil.copy(template / "adapter_config.json", folder / "adapter_config.json")
        folders.append(folder)
    return folders


# --- figures (pure) ---------------------------------------------------------------------


@dataclass
class Round:
    """One configuration's batch of concurrent streams in one round."""

    ttfts_ms: list[float]
    tokens: int
    wall_s: float
    rss_mb: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else float("nan")


@dataclass
class ColdLoad:
    """An adapter never loaded before: the load call, then two requests on it one after another."""

    load_ms: float
    cold_ttft_ms: float
    warm_ttft_ms: float
    rss_added_mb: float


def config_figures(rounds: list[Round]) -> dict[str, float]:
    """TTFT percentiles over every stream of every round; tokens/s the median over rounds."""
    ttfts = [t for r in rounds for t in r.ttfts_ms]
    return {
        "ttft_p50_ms": median(ttfts),
        "ttft_p99_ms": percentile(ttfts, 0.99),
        "tokens_per_s": median([r.tokens_per_s for r in rounds]),
        "rss_mb": max((r.rss_mb for r in rounds), default=float("nan")),
    }


def ratios(rounds: list[Round], reference: list[Round]) -> dict[str, float]:
    """Against the reference configuration, paired round by round (drift cancels out): the
    median over rounds of this round's figure / the reference's figure in the same round."""

    def paired(value) -> float:  # noqa: ANN001
        pairs = zip(rounds, reference, strict=True)
        return median([value(a) / value(b) for a, b in pairs])

    return {
        "ttft_p50": paired(lambda r: median(r.ttfts_ms)),
        "ttft_p99": paired(lambda r: percentile(r.ttfts_ms, 0.99)),
        "tokens_per_s": paired(lambda r: r.tokens_per_s),
        "rss": paired(lambda r: r.rss_mb),
    }


def cold_load_figures(loads: list[ColdLoad]) -> dict[str, float]:
    return {
        "count": len(loads),
        "load_ms_median": median([c.load_ms for c in loads]),
        "load_ms_max": max((c.load_ms for c in loads), default=float("nan")),
        "cold_ttft_ms_median": median([c.cold_ttft_ms for c in loads]),
        "warm_ttft_ms_median": median([c.warm_ttft_ms for c in loads]),
        "cold_over_warm_ttft": median([c.cold_ttft_ms / c.warm_ttft_ms for c in loads]),
        "rss_added_mb_median": median([c.rss_added_mb for c in loads]),
    }


def table(results: dict[str, list[Round]], streams: int) -> str:
    """The side-by-side table, every configuration against the one-adapter case."""
    lines = [
        f"{'adapters':<10}{'streams':>8}{'TTFT p50 ms':>13}{'TTFT p99 ms':>13}{'tok/s':>8}"
        f"{'RSS MB':>9}{'p50 ×':>8}{'p99 ×':>8}{'tok/s ×':>9}{'RSS ×':>8}"
    ]
    for name, rounds in results.items():
        f, r = config_figures(rounds), ratios(rounds, results[REFERENCE])
        lines.append(
            f"{name:<10}{streams:>8}{f['ttft_p50_ms']:>13.1f}{f['ttft_p99_ms']:>13.1f}"
            f"{f['tokens_per_s']:>8.1f}{f['rss_mb']:>9.0f}{r['ttft_p50']:>8.3f}"
            f"{r['ttft_p99']:>8.3f}{r['tokens_per_s']:>9.3f}{r['rss']:>8.3f}"
        )
    return "\n".join(lines)


def stream_models(config: str, streams: int) -> list[str]:
    """The model each of the round's streams asks for: the base, or adapters spread evenly.

    >>> stream_models("2", 4), stream_models(BASE, 2)
    (['user-00', 'user-01', 'user-00', 'user-01'], ['base', 'base'])
    """
    if config == BASE:
        return [BASE] * streams
    return [adapter_name(i % int(config)) for i in range(streams)]


# --- the vLLM server --------------------------------------------------------------------


@dataclass
class Server:
    url: str  # …/v1
    headers: dict[str, str]
    pid: int
    log_path: Path
    started_s: float = field(default=0.0)

    def rss_mb(self) -> float:
        """Resident memory of the API server and every process it spawned (the engine core)."""
        import psutil

        root = psutil.Process(self.pid)
        total = 0
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                total += process.memory_info().rss
        return total / 2**20


@contextlib.contextmanager
def running_vllm(
    model_dir: Path, *, max_loras: int, max_cpu_loras: int, log_path: Path, timeout_s: float
) -> Iterator[Server]:
    """vLLM alone, with the command line Parley's `serve` process uses, on a free port."""
    from tests.helpers import free_port
    from webapp.infra.serving import VllmOptions, serving_dtype, vllm_server_command

    port, key = free_port(), secrets.token_urlsafe(32)
    command, env = vllm_server_command(
        VllmOptions(
            model_dir=str(model_dir),
            port=port,
            dtype=serving_dtype("auto", cuda=False),
            max_loras=max_loras,
            extra_args=("--max-cpu-loras", str(max_cpu_loras)),
            cpu_kvcache_space=2,
            api_key=key,
        )
    )
    started = time.perf_counter()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url, last_report = f"http://127.0.0.1:{port}", started
        while True:
            if process.poll() is not None:
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
                raise RuntimeError(f"vLLM exited with {process.returncode}; its log ends:\n{tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            now = time.perf_counter()
            if now - started > timeout_s:
                raise RuntimeError(f"vLLM did not answer /health in {timeout_s:.0f} s: {log_path}")
            if now - last_report >= 15:
                say(f"waiting for vLLM to start: {now - started:.0f} s")
                last_report = now
            time.sleep(1)
        elapsed = time.perf_counter() - started
        say(f"vLLM ready in {elapsed:.0f} s (pid {process.pid}, log {log_path})")
        yield Server(
            f"{url}/v1", {"Authorization": f"Bearer {key}"}, process.pid, log_path, elapsed
        )
    finally:
        stop_process_group(process)


# --- the run ----------------------------------------------------------------------------


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
