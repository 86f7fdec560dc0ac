"""Shared benchmark plumbing: start the real system, time streamed requests, record results."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results.jsonl"


@dataclass(frozen=True)
class RunningSystem:
    web_url: str
    vllm_url: str
    api_key: str
    var_dir: Path
    env: dict[str, str]
    log: list[str] = field(default_factory=list)
    """The system's output so far (every process, as the launcher prints it)."""

    @property
    def vllm_headers(self) -> dict[str, str]:
        """vLLM refuses calls without the system's key (VLLM_API_KEY, given at its start)."""
        return {"Authorization": f"Bearer {self.env['VLLM_API_KEY']}"}

    def manage(self, *args: str) -> str:
        """A manage.py command against this system (its database, its serving replicas)."""
        import subprocess
        import sys

        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout


@contextmanager
def running_system(extra_env: dict[str, str] | None = None) -> Iterator[RunningSystem]:
    """The whole system, started by its own launcher on free ports in a scratch var/."""
    import secrets
    import subprocess
    import sys

    from bench.launching import Launcher, clean_env, free_port

    web_port, vllm_port = free_port(), free_port()
    var_dir = Path(tempfile.mkdtemp(prefix="parley-bench-"))
    env = clean_env(
        PARLEY_VAR_DIR=str(var_dir),
        PARLEY_PORT=str(web_port),
        VLLM_PORT=str(vllm_port),
        PARLEY_API_RATE_LIMIT_PER_MINUTE="0",
        # Known here, so the benchmarks that call vLLM directly can send it.
        VLLM_API_KEY=secrets.token_urlsafe(32),
        # Benchmarks drive many streams through one key; the flooding-user run of bench.load
        # turns the per-user limits back on (it gives every user a key of their own).
        PARLEY_USER_MAX_STREAMS="0",
        PARLEY_USER_RATE_LIMIT_PER_MINUTE="0",
    )
    env.update(extra_env or {})
    print(f"bench | starting Parley (vLLM would warm up for a minute) in {var_dir}", flush=True)
    launcher = Launcher(env)
    try:
        launcher.wait_for("Parley is ready at", timeout=900)
        key = subprocess.run(
            [sys.executable, "manage.py", "create_api_key", "--user", "bench", "--create-user"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        yield RunningSystem(
            f"http://127.0.0.1:{web_port}",
            f"http://127.0.0.1:{vllm_port}/v1",
            key,
            var_dir,
            env,
            launcher.lines,
        )
    except BaseException:
        # the system's own output says why a benchmark failed; it would go with the process
        log = var_dir / "system.log"
        log.write_text("\n".join(launcher.lines) + "\n")
        print("\n".join(launcher.lines[-40:]), file=sys.stderr)
        print(f"bench | the system's whole output: {log}", file=sys.stderr, flush=True)
        raise
    finally:
        launcher.interrupt()
        launcher.kill()


@dataclass
class StreamTiming:
    ttft_s: float
    total_s: float
    tokens: int


async def timed_stream(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> StreamTiming:
    """One streamed chat completion: time to the first content token, total time, tokens."""
    started = time.perf_counter()
    first: float | None = None
    tokens = 0
    async with client.stream("POST", url, json=body, headers=headers or {}) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for choice in chunk.get("choices") or []:
                if choice["delta"].get("content") and first is None:
                    first = time.perf_counter() - started
    total = time.perf_counter() - started
    return StreamTiming(ttft_s=first if first is not None else total, total_s=total, tokens=tokens)


async def concurrent_streams(
    url: str, bodies: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> tuple[list[StreamTiming], float]:
    """All ``bodies`` streamed at once; returns each timing and the wall time of the batch."""
    async with httpx.AsyncClient(timeout=600) as client:
        started = time.perf_counter()
        timings = await asyncio.gather(*(timed_stream(client, url, b, headers) for b in bodies))
        return list(timings), time.perf_counter() - started


def sql(var_dir: Path, query: str, params: tuple = ()) -> list[tuple]:
    """Rows from the running system's own PostgreSQL, found through its var/run/infra.json."""
    import psycopg

    from webapp.config import database_from_url

    url = json.loads((var_dir / "run" / "infra.json").read_text())["database_url"]
    db = database_from_url(url)
    with psycopg.connect(host=db["HOST"], user=db["USER"], dbname=db["NAME"]) as conn:
        return conn.execute(query, params).fetchall()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def record(name: str, figures: dict[str, Any]) -> None:
    """Append one benchmark's figures to bench/results.jsonl (docs/benchmarks.md quotes them)."""
    entry = {
        "bench": name,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        **figures,
    }
    # PARLEY_BENCH_RESULTS: another file (a sweep's worker processes in a test, a GPU box).
    path = Path(os.environ.get("PARLEY_BENCH_RESULTS") or RESULTS)
    with path.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
    print(f"bench | appended to {path}")


def stop_process_group(process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Stop a server started in a session of its own (``start_new_session=True``): SIGTERM to
    its whole group, SIGKILL to the group if it has not ended within ``timeout`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
