"""Two real train workers on the real broker and PostgreSQL: updates of different lineages run
at the same time, two updates of one lineage never do.

The workers run Parley's own task, lock, claim, finish and publish; only the trainer takes a set
time instead of training (``bench.modelled_training``), so the overlap is the schedule's, not
the luck of two training runs' lengths on a busy machine (a real update of the real model in a
killed worker: tests/integration/test_worker_faults.py)."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model

from bench.launching import start_worker, stop_worker
from tests.factories import feedback_samples
from tests.helpers import database_url, send_json
from webapp.celery import app
from webapp.learning.models import TrainingUpdate
from webapp.learning.selectors import policy_version_live

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

UPDATE_S = 4.0


class AdapterLoads(BaseHTTPRequestHandler):
    """A serving replica that accepts every adapter load."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        send_json(self, {"ok": True})

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def serving():
    server = ThreadingHTTPServer(("127.0.0.1", 0), AdapterLoads)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _env(serving_url: str, adapters_dir) -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        DATABASE_URL=database_url(),
        VLLM_BASE_URLS=serving_url,
        PARLEY_LEARNING_SCOPE="user",
        PARLEY_TRAIN_BATCH_SIZE="3",
        PARLEY_TRAIN_WORKERS="2",
        PARLEY_TRAIN_PEOPLE_PER_STEP="1",  # each worker one update: the two workers overlap
        PARLEY_ADAPTERS_DIR=str(adapters_dir),
        PARLEY_BENCH_UPDATE_S=str(UPDATE_S),
    )


def test_two_workers_train_two_lineages_at_once_and_one_lineage_in_turn(
    serving, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a, **k: None)
    users = get_user_model()
    alice, bob = users.objects.create_user("alice"), users.objects.create_user("bob")
    feedback_samples(alice, 6)
    feedback_samples(bob, 3)

    def update(owner) -> TrainingUpdate:
        return TrainingUpdate.objects.create(
            algorithm="rl",
            owner=owner,
            config={"algorithm": "rl"},
            base_version=policy_version_live(owner_id=owner.pk),
        )

    # Two of alice's at once, as a redelivered task or a second scheduler could make them.
    updates = [update(alice), update(bob), update(alice)]
    env = _env(serving, tmp_path)
    workers = [
        start_worker("train", f"parallel-{i}-{time.time()}", env, app="bench.modelled_training")
        for i in range(2)
    ]
    try:
        for one in updates:
            app.send_task("webapp.learning.tasks.train_update", args=[one.pk], queue="train")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            rows = TrainingUpdate.objects.filter(pk__in=[u.pk for u in updates])
            statuses = {row.status for row in rows}
            if statuses <= {"done", "rejected", "failed"}:
                break
            time.sleep(1)
    finally:
        for worker in workers:
            stop_worker(worker)
    first, other, second = (TrainingUpdate.objects.get(pk=u.pk) for u in updates)
    for one in (first, other, second):
        assert one.status == "done", (one.pk, one.status, one.error)
    # alice's and bob's updates trained at the same time, on the two workers...
    assert first.started_at < other.finished_at and other.started_at < first.finished_at
    # ...while alice's second waited for her first (her lock), then trained her other three.
    assert second.started_at >= first.finished_at
    assert set(first.summary["sample_ids"]).isdisjoint(second.summary["sample_ids"])
    assert other.finished_at - other.started_at >= timedelta(seconds=UPDATE_S)
