"""Load: N concurrent users chat (half in the browser's websocket, half through /v1) and give
feedback after every answer, while the live version is published back and forth.

Reports failed requests (target 0), whether every feedback was stored exactly once (checked in
the system's own PostgreSQL), and p50/p99 latency of a whole answer per door.

    python -m bench.load [--users 20] [--rounds 3] [--max-tokens 32] [--publishes 6]
    python -m bench.load --flood [--users 3] [--rounds 10] [--cycles 3] [--max-tokens 16]
                         [--flood-connections 8] [--flood-max-tokens 48]

``--flood``: one user floods while the others chat; their p99 with and without the flood
(bench/load_flood.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import ROOT, percentile, record, running_system, sql
from bench.load_users import Tally, api_user, websocket_user


def publisher(manage: Callable[..., str], count: int, stop: threading.Event) -> list[str]:
    """Publish v1 and v0 in turn until ``count`` publishes are done or the load is over."""
    done: list[str] = []
    for n in range(count):
        if stop.is_set():
            break
        done.append(manage("publish_version", str(1 if n % 2 == 0 else 0)).strip())
    return done


def make_adapter(var_dir: Path, manage: Callable[..., str]) -> None:
    """A real (untrained, randomly initialised) LoRA adapter registered as candidate v1."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out = var_dir / "adapters" / "load-v1"
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(
        str(ROOT / "var" / "models" / "SmolLM2-135M-Instruct"), dtype=torch.float32
    )
    get_peft_model(
        base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    ).save_pretrained(str(out))
    manage(
        "shell",
        "-c",
        "from webapp.learning.models import PolicyVersion as P; P.objects.get_or_create("
        f"number=1, defaults=dict(adapter_path='{out}', status='candidate'))",
    )


def run_load(
    *,
    web_url: str,
    api_key: str,
    var_dir: Path,
    manage: Callable[..., str],
    users: int,
    rounds: int,
    max_tokens: int,
    publishes: int,
) -> dict[str, Any]:
    """Drive the load and check the database afterwards; returns the figures."""
    tag = uuid.uuid4().hex[:8]
    tally = Tally()
    stop = threading.Event()
    published: list[str] = []
    thread = threading.Thread(
        target=lambda: published.extend(publisher(manage, publishes, stop)), daemon=True
    )

    async def everyone() -> None:
        socket_users = users // 2
        await asyncio.gather(
            *(
                websocket_user(web_url, u, rounds, max_tokens, tally, tag)
                for u in range(socket_users)
            ),
            *(
                api_user(web_url, api_key, u, rounds, max_tokens, tally, tag)
                for u in range(socket_users, users)
            ),
        )

    started = time.perf_counter()
    thread.start()
    try:
        asyncio.run(everyone())
    finally:
        stop.set()
        thread.join(timeout=300)
    wall = time.perf_counter() - started

    stored = dict(
        sql(
            var_dir,
            "SELECT comment, count(*) FROM chat_feedback WHERE comment LIKE %s GROUP BY comment",
            (f"load-{tag}-%",),
        )
    )
    missing = sorted(set(tally.feedback_sent) - set(stored))
    duplicated = sorted(c for c, n in stored.items() if n != 1)
    unexpected = sorted(set(stored) - set(tally.feedback_sent))
    statuses = dict(
        sql(
            var_dir,
            "SELECT m.status, count(*) FROM chat_message m JOIN chat_conversation c "
            "ON c.id = m.conversation_id JOIN auth_user u ON u.id = c.owner_id "
            "WHERE m.role = 'assistant' AND (u.username LIKE %s OR c.external_session_id LIKE %s) "
            "GROUP BY m.status",
            (f"load-{tag}-%", f"{tag}-%"),
        )
    )
    every = tally.latencies["websocket"] + tally.latencies["api"]
    return {
        "users": users,
        "rounds": rounds,
        "max_tokens": max_tokens,
        "requests": tally.requests,
        "failures": len(tally.failures),
        "failure_reasons": tally.failures[:10],
        "publishes": len(published),
        "feedback_sent": len(tally.feedback_sent),
        "feedback_stored_once": len(tally.feedback_sent) - len(missing) - len(duplicated),
        "feedback_missing": missing,
        "feedback_duplicated": duplicated,
        "feedback_unexpected": unexpected,
        "answers_by_status": statuses,
        "wall_s": round(wall, 1),
        "p50_s": percentile(every, 0.5),
        "p99_s": percentile(every, 0.99),
        "websocket_p50_s": percentile(tally.latencies["websocket"], 0.5),
        "websocket_p99_s": percentile(tally.latencies["websocket"], 0.99),
        "api_p50_s": percentile(tally.latencies["api"], 0.5),
        "api_p99_s": percentile(tally.latencies["api"], 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=None, help="20 (3 with --flood)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="answers per user: 3 (10 with --flood: a p99 of 12 answers is their maximum)",
    )
    parser.add_argument("--max-tokens", type=int, default=None, help="32 (16 with --flood)")
    parser.add_argument("--publishes", type=int, default=6)
    parser.add_argument("--flood", action="store_true", help="one user floods; see load_flood")
    parser.add_argument("--flood-connections", type=int, default=8)
    parser.add_argument("--flood-max-tokens", type=int, default=48)
    parser.add_argument(
        "--cycles", type=int, default=3, help="--flood: alone/flood phase pairs, alternated"
    )
    parser.add_argument(
        "--flood-user-streams", type=int, default=2, help="PARLEY_USER_MAX_STREAMS for the run"
    )
    parser.add_argument(
        "--judge",
        choices=("cues", "llm"),
        default="cues",
        help="--flood: PARLEY_JUDGE for the run: cues (the default: no model time) or llm "
        "(every judged turn costs up to 2·m generations on the vLLM that serves chat)",
    )
    args = parser.parse_args()
    if args.flood:
        args.users, args.rounds = args.users or 3, args.rounds or 10
        args.max_tokens = args.max_tokens or 16
        flood(args)
        return
    args.users, args.rounds = args.users or 20, args.rounds or 3
    args.max_tokens = args.max_tokens or 32
    with running_system() as system:
        make_adapter(system.var_dir, system.manage)
        figures = run_load(
            web_url=system.web_url,
            api_key=system.api_key,
            var_dir=system.var_dir,
            manage=system.manage,
            users=args.users,
            rounds=args.rounds,
            max_tokens=args.max_tokens,
            publishes=args.publishes,
        )
    print(json.dumps(figures, indent=2))
    ok = figures["failures"] == 0 and figures["feedback_stored_once"] == figures["feedback_sent"]
    print(
        f"\n{figures['requests']} requests from {args.users} users, {figures['failures']} failed; "
        f"{figures['feedback_stored_once']}/{figures['feedback_sent']} feedback stored exactly "
        f"once; {figures['publishes']} publishes; p50 {figures['p50_s']:.2f} s, "
        f"p99 {figures['p99_s']:.2f} s -> {'OK' if ok else 'FAILED'}"
    )
    record("load", {k: v for k, v in figures.items() if k != "failure_reasons"})


WAITED = re.compile(r"judge work \S+ waited ([0-9.]+) s for other users' answers")


def system_activity(log: list[str]) -> dict[str, Any]:
    """What the system did beside the answers, read from its log: judge tasks that waited for
    other users' answers (and how long), judge tasks run, training updates that finished."""
    waits = [float(m.group(1)) for line in log if (m := WAITED.search(line))]
    return {
        "judge_waits": len(waits),
        "judge_wait_mean_s": round(sum(waits) / len(waits), 2) if waits else 0.0,
        "judge_tasks_done": sum("judge_message[" in line and "succeeded" in line for line in log),
        "updates_trained": sum("train_update[" in line and "succeeded" in line for line in log),
    }


def flood(args: argparse.Namespace) -> None:
    from bench.load_flood import FLOOD_ENV, print_summary, run_flood

    env = {
        **FLOOD_ENV,
        "PARLEY_USER_MAX_STREAMS": str(args.flood_user_streams),
        "PARLEY_JUDGE": args.judge,
    }
    with running_system(extra_env=env) as system:
        figures = run_flood(
            web_url=system.web_url,
            var_dir=system.var_dir,
            manage=system.manage,
            log=system.log,
            users=args.users,
            rounds=args.rounds,
            max_tokens=args.max_tokens,
            flood_connections=args.flood_connections,
            flood_max_tokens=args.flood_max_tokens,
            cycles=args.cycles,
        )
        figures.update(system_activity(system.log))
    figures["user_max_streams"] = args.flood_user_streams
    figures["judge"] = args.judge
    figures["judge_yield_s"] = float(os.environ.get("PARLEY_JUDGE_YIELD_S") or 10.0)
    print_summary(figures)
    record("load-flood", {k: v for k, v in figures.items() if k != "failure_reasons"})


if __name__ == "__main__":
    main()
