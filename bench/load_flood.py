"""One user floods, the others chat: their p99 with the flood vs without it, in one run.

The others (each their own user and key) ask short streamed questions one after another,
first alone, then while one user floods ``/v1`` from many connections at once, continuing each
session so every answer gets a next state, and 👎 with a comment on every answer, so the judge
has work for every one of them (with ``--judge llm`` that work is generations on the same vLLM
as chat). The per-user limits are on (``PARLEY_USER_MAX_STREAMS`` etc.): a flooder's requests
past them get 429s, as they would in production. Before each "alone" phase after a flood the
run waits until the judge tasks the flood caused have finished, so none of its cost lands on
the baseline. Reported: the others' TTFT and whole-answer p50/p99 in both phases and their
ratio (target ≤ 1.5×), the flooder's answers and refusals, judgements made.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.common import percentile, timed_stream

PROMPTS = ["Name a colour.", "Say hello in French.", "What is 3 plus 4?", "Name a fruit."]
# What a running system needs for this benchmark: the per-user limits a production system has
# (the benchmarks' common start-up turns them off).
FLOOD_ENV = {
    "PARLEY_USER_MAX_STREAMS": "2",
    "PARLEY_USER_RATE_LIMIT_PER_MINUTE": "600",
}


def make_users(manage: Any, tag: str, count: int) -> list[str]:
    """``count`` users with one API key each, made in one manage.py call; their secrets."""
    code = (
        "from django.contrib.auth import get_user_model; "
        "from webapp.api.keys import api_key_create; U = get_user_model(); "
        f"print(','.join(api_key_create(owner=U.objects.create_user('flood-{tag}-' + str(i)))[1]"
        f" for i in range({count})))"
    )
    return manage("shell", "-c", code).strip().splitlines()[-1].split(",")


async def other_user(
    web_url: str, key: str, user: int, rounds: int, max_tokens: int, out: dict[str, list]
) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=web_url, timeout=600) as client:
        for round_ in range(rounds):
            body = {
                "model": "parley",
                "stream": True,
                "max_tokens": max_tokens,
                "temperature": 0.7,
                "messages": [{"role": "user", "content": PROMPTS[(user + round_) % len(PROMPTS)]}],
            }
            try:
                timing = await timed_stream(client, "/v1/chat/completions", body, headers)
            except Exception as exc:  # noqa: BLE001 - counted, never stops the run
                out["failures"].append(f"user {user}: {type(exc).__name__}: {exc}")
                continue
            out["ttft"].append(timing.ttft_s)
            out["total"].append(timing.total_s)


async def flooder(
    web_url: str, key: str, connections: int, max_tokens: int, stop: asyncio.Event, tally: dict
) -> None:
    """Many connections of one user: each continues its session, then 👎 with a comment."""

    async def one(connection: int) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=web_url, timeout=600, headers=headers) as client:
            history: list[dict[str, str]] = []
            session = uuid.uuid4().hex
            while not stop.is_set():
                if len(history) >= 4:  # keep prompts short: a new session every two turns
                    history, session = [], uuid.uuid4().hex
                history.append({"role": "user", "content": "Tell me something about rivers."})
                body = {
                    "model": "parley",
                    "max_tokens": max_tokens,
                    "messages": history,
                }
                response = await client.post(
                    "/v1/chat/completions", json=body, headers={"X-Session-Id": session}
                )
                if response.status_code == 429:
                    tally["refused"] += 1
                    history.pop()
                    await asyncio.sleep(0.2)  # a client that hammers, barely backing off
                    continue
                if response.status_code != 200:
                    tally["errors"] += 1
                    history.pop()
                    await asyncio.sleep(0.5)
                    continue
                tally["answered"] += 1
                answer = response.json()
                history.append(
                    {"role": "assistant", "content": answer["choices"][0]["message"]["content"]}
                )
                await client.post(
                    "/v1/feedback",
                    json={
                        "completion_id": answer["id"],
                        "rating": -1,
                        "comment": "Wrong: you should have said where the river starts.",
                    },
                )
                tally["feedback"] += 1

    await asyncio.gather(*(one(c) for c in range(connections)))


_JUDGE_TASK = re.compile(
    r"judge_message\[([0-9a-f-]+)\] (received|succeeded|raised|retry|ignored|INTERNAL ERROR)"
)


def judge_tasks_pending(log: Sequence[str]) -> int:
    """Judge tasks a worker has received and not finished, read from the system's log in
    order (a retried task is received again under the same id)."""
    pending: set[str] = set()
    for line in list(log):
        if match := _JUDGE_TASK.search(line):
            if match.group(2) == "received":
                pending.add(match.group(1))
            else:
                pending.discard(match.group(1))
    return len(pending)


async def judging_drained(log: Sequence[str], *, timeout: float = 300.0) -> float:
    """Wait until no judge task is pending and none has arrived for 3 s; the seconds waited.
    Before an "alone" phase, so judging that a flood caused is not charged to the baseline."""
    started = time.perf_counter()
    quiet_since = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if judge_tasks_pending(log):
            quiet_since = time.perf_counter()
        elif time.perf_counter() - quiet_since >= 3.0:
            break
        await asyncio.sleep(0.5)
    return time.perf_counter() - started


def run_flood(
    *,
    web_url: str,
    var_dir: Path,
    manage: Any,
    log: Sequence[str],
    users: int,
    rounds: int,
    max_tokens: int,
    flood_connections: int,
    flood_max_tokens: int,
    cycles: int = 3,
) -> dict[str, Any]:
    """``cycles`` times: the others alone, then with the flood (``rounds`` answers each per
    phase). Alternating the phases spreads any drift in the machine's other load over both."""
    tag = uuid.uuid4().hex[:8]
    keys = make_users(manage, tag, users + 1)
    others, flood_key = keys[:users], keys[users]
    phases: dict[str, dict[str, list]] = {
        name: {"ttft": [], "total": [], "failures": []} for name in ("alone", "flood")
    }
    tally = {"answered": 0, "refused": 0, "errors": 0, "feedback": 0}

    async def phase(name: str) -> None:
        await asyncio.gather(
            *(
                other_user(web_url, others[u], u, rounds, max_tokens, phases[name])
                for u in range(users)
            )
        )

    drain_waits: list[float] = []

    async def both() -> float:
        wall = 0.0
        for cycle in range(cycles):
            if cycle:
                drain_waits.append(round(await judging_drained(log), 1))
            await phase("alone")
            stop = asyncio.Event()
            flood = asyncio.ensure_future(
                flooder(web_url, flood_key, flood_connections, flood_max_tokens, stop, tally)
            )
            await asyncio.sleep(5)  # the flood (and the judging it causes) is under way
            started = time.perf_counter()
            await phase("flood")
            stop.set()
            await flood
            wall += time.perf_counter() - started
        return wall

    flood_wall = asyncio.run(both())
    judged = _judgements(var_dir, tag, flooder_name=f"flood-{tag}-{users}")
    figures: dict[str, Any] = {
        "users": users,
        "rounds": rounds,
        "cycles": cycles,
        "max_tokens": max_tokens,
        "flood_connections": flood_connections,
        "flood_max_tokens": flood_max_tokens,
        "flood_wall_s": round(flood_wall, 1),
        "flooder": tally,
        "judgements": judged,
        "judge_drain_waits_s": drain_waits,
    }
    for name, values in phases.items():
        figures[f"{name}_failures"] = len(values["failures"])
        # every answer's TTFT, so a p99 (here nearly the maximum) can be read with its tail
        figures[f"{name}_ttft_sorted_s"] = sorted(round(t, 3) for t in values["ttft"])
        for metric in ("ttft", "total"):
            figures[f"{name}_{metric}_p50_s"] = round(percentile(values[metric], 0.5), 3)
            figures[f"{name}_{metric}_p99_s"] = round(percentile(values[metric], 0.99), 3)
    for metric in ("ttft", "total"):
        for q in ("p50", "p99"):
            alone = figures[f"alone_{metric}_{q}_s"]
            figures[f"{metric}_{q}_ratio"] = round(figures[f"flood_{metric}_{q}_s"] / alone, 2)
    figures["failure_reasons"] = (phases["alone"]["failures"] + phases["flood"]["failures"])[:5]
    return figures


def _judgements(var_dir: Path, tag: str, *, flooder_name: str) -> dict[str, int]:
    """Judgements of the flooder's turns and of the others' (made while the run lasted)."""
    from bench.common import sql

    rows = sql(
        var_dir,
        "SELECT u.username = %s, count(*) FROM learning_judgement j "
        "JOIN chat_message m ON m.id = j.message_id "
        "JOIN chat_conversation c ON c.id = m.conversation_id "
        "JOIN auth_user u ON u.id = c.owner_id WHERE u.username LIKE %s GROUP BY 1",
        (flooder_name, f"flood-{tag}-%"),
    )
    return {("flooder" if is_flooder else "others"): n for is_flooder, n in rows}


def print_summary(figures: dict[str, Any]) -> None:
    print(json.dumps(figures, indent=2))
    ok = figures["ttft_p99_ratio"] <= 1.5 and figures["total_p99_ratio"] <= 1.5
    print(
        f"\nthe other {figures['users']} users' p99 with one user flooding vs without: "
        f"TTFT {figures['alone_ttft_p99_s']:.2f} → {figures['flood_ttft_p99_s']:.2f} s "
        f"({figures['ttft_p99_ratio']}×), whole answer {figures['alone_total_p99_s']:.2f} → "
        f"{figures['flood_total_p99_s']:.2f} s ({figures['total_p99_ratio']}×) -> "
        f"{'OK' if ok else 'over the 1.5× target'}"
    )
