"""One run of ``bench.many_users``: people, feedback, real scheduling and workers, figures.

Runs inside Django (the benchmark's scratch PostgreSQL and Redis). The serving replicas are
small HTTP servers that accept adapter loads and unloads, as vLLM's endpoints do, and count
what each one holds.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.common import percentile
from bench.launching import start_worker, stop_worker
from bench.many_users_figures import (
    due_times,
    most_at_once,
    queue_delays,
    rounds_behind,
    same_lineage_overlaps,
)

COMPRESSION = 50.0
"""Simulated seconds per benchmark second: an update of 25 s (a 4B model's update and gate on
an H200, docs/production.md) takes 0.5 s here, the 600 s batch wait 12 s, and a person's
feedback every 5.5 hours (four or five a day) comes every 400 s."""


class Replicas:
    """Serving replicas that hold adapters: loaded by name, unloaded by name, listed."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.held: list[set[str]] = [set() for _ in range(count)]
        self.loads = [0] * count
        self.most = [0] * count
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []

    def __enter__(self) -> Replicas:
        for index in range(self.count):
            server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(index))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers.append(server)
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self._servers:
            server.shutdown()

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{s.server_address[1]}/v1" for s in self._servers]

    def reset(self) -> None:
        with self._lock:
            self.held = [set() for _ in range(self.count)]
            self.loads, self.most = [0] * self.count, [0] * self.count

    def _handler(self, index: int) -> type[BaseHTTPRequestHandler]:
        replicas = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                name = body.get("lora_name", "")
                with replicas._lock:
                    held = replicas.held[index]
                    if self.path.endswith("/load_lora_adapter"):
                        held.add(name)
                        replicas.loads[index] += 1
                        replicas.most[index] = max(replicas.most[index], len(held))
                    elif self.path.endswith("/unload_lora_adapter"):
                        held.discard(name)
                self._send({"ok": True})

            def do_GET(self) -> None:
                with replicas._lock:
                    names = sorted(replicas.held[index])
                data = [{"id": "base", "root": "base"}]
                data += [{"id": name, "root": name, "parent": "base"} for name in names]
                self._send({"object": "list", "data": data})

            def _send(self, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                return

        return Handler


def _reset_database() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from webapp.chat.models import Conversation, Message
    from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate

    models = [Sample, Judgement, TrainingUpdate, PolicyVersion, Message, Conversation]
    tables = ", ".join(m._meta.db_table for m in [*models, get_user_model()])
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


def _people(count: int) -> list[Any]:
    """``count`` people, each with one conversation to give feedback in."""
    from django.contrib.auth import get_user_model

    from webapp.chat.models import Conversation

    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"person{i}", password="!") for i in range(count)]
    )
    return Conversation.objects.bulk_create(
        [Conversation(owner=user, title="bench") for user in users]
    )


def _feedback(conversations: list[Any], rng: random.Random) -> int:
    """One judged answer with a 👍 or 👎 in each of these conversations: ready samples."""
    from webapp.chat.models import Message
    from webapp.learning.models import Judgement, Sample
    from webapp.learning.selectors import policy_version_live

    if not conversations:
        return 0
    base = policy_version_live()
    asks = Message.objects.bulk_create(
        [Message(conversation=c, role="user", content="a question") for c in conversations]
    )
    answers = Message.objects.bulk_create(
        [
            Message(
                conversation=c, parent=q, role="assistant", content="an answer", policy_version=base
            )
            for c, q in zip(conversations, asks, strict=True)
        ]
    )
    scores = [rng.choice([1, -1]) for _ in answers]
    judgements = Judgement.objects.bulk_create(
        [
            Judgement(message=a, fingerprint="bench", source="feedback", score=s)
            for a, s in zip(answers, scores, strict=True)
        ]
    )
    Sample.objects.bulk_create(
        [
            Sample(
                message=a,
                judgement=j,
                kind="rl",
                reward=float(s),
                prompt_token_ids=[1, 2],
                response_token_ids=[5, 6],
                response_logprobs=[-1.0, -1.0],
                prompt_messages=[{"role": "user", "content": "a question"}],
                policy_version=base,
            )
            for a, j, s in zip(answers, judgements, scores, strict=True)
        ]
    )
    return len(answers)


def _start_workers(count: int, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    from webapp.celery import app

    app.control.purge()
    workers = [
        start_worker("train", f"many-{i}", env, app="bench.modelled_training", quiet=True)
        for i in range(count)
    ]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        answered = app.control.inspect(timeout=1.0).ping() or {}
        if sum(1 for name in answered if name.startswith("many-")) >= count:
            return workers
    raise RuntimeError("the train workers did not start within 120 s")


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        stop_worker(worker)


def simulate(
    *,
    people: int,
    workers: int,
    duration_s: float,
    rate_per_s: float,
    update_s: float,
    replicas: Replicas,
) -> dict[str, Any]:
    from django.conf import settings
    from django.db.models import Min
    from django.utils import timezone

    from webapp.learning.models import Sample
    from webapp.learning.workflows import claiming, residency

    print(f"bench | {people} people, {workers} train worker(s)", flush=True)
    _reset_database()
    replicas.reset()
    conversations = _people(people)
    # The updates modelled are a GPU's, and so is its default of people per stacked run.
    settings.TRAIN_WORKERS, settings.TRAIN_PEOPLE_PER_STEP = workers, 8
    settings.VLLM_BASE_URLS = replicas.urls  # the unload sweep's, run here as beat would
    settings.ADAPTER_UNLOAD_GRACE_S = round(900 / COMPRESSION)
    env = dict(
        os.environ,
        VLLM_BASE_URLS=",".join(replicas.urls),
        PARLEY_TRAIN_WORKERS=str(workers),
        PARLEY_TRAIN_PEOPLE_PER_STEP="8",
        PARLEY_BENCH_UPDATE_S=str(update_s),
        PARLEY_ADAPTERS_DIR=tempfile.mkdtemp(prefix="parley-many-users-adapters-"),
    )
    running = _start_workers(workers, env)
    rng = random.Random(people * 31 + workers)
    tick, given, queue_calls, oldest_waits, swept = 0.2, 0, [], [0.0], 0.0
    drain_s = 4 * settings.TRAIN_MAX_WAIT_S + 10
    started = time.monotonic()
    try:
        while True:
            elapsed = time.monotonic() - started
            feeding = elapsed < duration_s
            if feeding:
                count = _poisson(rng, people * rate_per_s * tick)
                given += _feedback([rng.choice(conversations) for _ in range(count)], rng)
            t0 = time.perf_counter()
            claiming.training_updates_queue()
            queue_calls.append(time.perf_counter() - t0)
            if elapsed - swept >= 60 / COMPRESSION:  # beat's minute
                residency.adapters_unload_retired()
                swept = elapsed
            ready = Sample.objects.filter(status=Sample.Status.READY)
            oldest = ready.aggregate(oldest=Min("created_at"))["oldest"]
            if oldest is not None:
                oldest_waits.append((timezone.now() - oldest).total_seconds())
            elif not feeding:
                break
            if elapsed > duration_s + drain_s:
                break
            time.sleep(max(0.0, tick - (time.perf_counter() - t0)))
    finally:
        _stop(running)
    figures = _figures(people=people, workers=workers, given=given, update_s=update_s)
    figures.update(
        oldest_wait_max_s=max(oldest_waits),
        queue_call_p50_ms=1000 * percentile(queue_calls, 0.5),
        queue_call_p99_ms=1000 * percentile(queue_calls, 0.99),
        resident_end=max(len(held) for held in replicas.held),
        resident_max=max(replicas.most),
        adapter_loads=sum(replicas.loads),
        duration_s=duration_s,
        rate_per_s=rate_per_s,
        replicas=replicas.count,
    )
    return figures


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw by counting exponential gaps (means here are a few at most)."""
    count, total = 0, rng.expovariate(1.0)
    while total < mean:
        count += 1
        total += rng.expovariate(1.0)
    return count


def _figures(*, people: int, workers: int, given: int, update_s: float) -> dict[str, Any]:
    from django.conf import settings
    from django.utils import timezone

    from webapp.learning.models import Sample, TrainingUpdate

    trained = list(
        Sample.objects.filter(status=Sample.Status.CONSUMED).values_list(
            "created_at", "update__produced_version__published_at"
        )
    )
    latencies = [(live - made).total_seconds() for made, live in trained if live is not None]
    now = timezone.now()
    waiting = [
        (now - made).total_seconds()
        for made in Sample.objects.filter(status=Sample.Status.READY).values_list(
            "created_at", flat=True
        )
    ]
    made = dict(Sample.objects.values_list("pk", "created_at"))
    updates = list(
        TrainingUpdate.objects.exclude(started_at=None)
        .exclude(finished_at=None)
        .values("pk", "owner_id", "created_at", "started_at", "finished_at", "summary")
    )
    due = due_times(updates, made, settings.TRAIN_MAX_WAIT_S)
    return {
        "people": people,
        "workers": workers,
        "update_s": update_s,
        "feedback": given,
        "trained": len(latencies),
        "updates": len(updates),
        "live_p50_s": percentile(latencies, 0.5) if latencies else float("nan"),
        "live_p99_s": percentile(latencies, 0.99) if latencies else float("nan"),
        "waiting_at_end": len(waiting),
        "waiting_oldest_s": max(waiting, default=0.0),
        "max_parallel": most_at_once(updates),
        "same_lineage_overlaps": same_lineage_overlaps(updates),
        "rounds_behind_max": rounds_behind(updates, due, workers),
        "queue_delay_p99_s": percentile(queue_delays(updates, due), 0.99),
    }
