"""Workers killed mid-task: the task is redelivered and its result is still recorded once.

Each test runs a real Celery worker process on the real broker against the test database,
kills it (SIGKILL, the whole process group) while it is inside the task, starts a new one, and
checks the rows. The broker's visibility timeout is set to a few seconds so redelivery is quick.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model

from bench.launching import start_worker, stop_worker
from tests.factories import AnswerFactory, feedback_samples
from tests.helpers import ROOT, database_url, send_json
from webapp.celery import app
from webapp.chat import services
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


class FakeServing(BaseHTTPRequestHandler):
    """A slow OpenAI-compatible judge and an adapter-loading endpoint, counting calls."""

    calls: list[str] = []
    delay_s = 4.0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeServing.calls.append(self.path)
        if self.path.endswith("/chat/completions"):
            time.sleep(FakeServing.delay_s)
            n = body.get("n", 1)
            text = (
                "\\boxed{-1}"
                if "boxed" in body["messages"][-1]["content"]
                else "[HINT_START]Be brief and exact.[HINT_END]"
            )
            payload = {"choices": [{"index": i, "message": {"content": text}} for i in range(n)]}
        else:
            payload = {"ok": True}
        send_json(self, payload)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def fake_serving():
    FakeServing.calls = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeServing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _worker_env(serving_url: str, var_dir, models_dir=ROOT / "var" / "models") -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        DATABASE_URL=database_url(),
        PARLEY_BROKER_VISIBILITY_TIMEOUT="5",
        VLLM_BASE_URLS=serving_url,
        JUDGE_BASE_URL=serving_url,
        PARLEY_JUDGE="llm",  # the worker must be inside the task, at the (slow) judge model
        PARLEY_ADAPTERS_DIR=str(var_dir),
        PARLEY_GATE_MAX_KL="100",
        PARLEY_GATE_MAX_PPL_RATIO="100",
        PARLEY_MODELS_DIR=str(models_dir),
    )


def _start_worker(queue: str, env: dict[str, str]) -> subprocess.Popen:
    return start_worker(queue, f"fault-{queue}-{time.time()}", env)


def _wait(check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError("timed out")


def _settled(update_id: int) -> bool:
    """The update failed or was refused by the gate, or it is done and its version published."""
    update = TrainingUpdate.objects.select_related("produced_version").get(pk=update_id)
    if update.status in ("failed", "rejected"):
        return True
    return update.status == "done" and update.produced_version.status != "candidate"


def _answer(user, question: str = "What is 2+2?"):
    return AnswerFactory(
        parent__conversation__owner=user,
        parent__content=question,
        content="5",
        token_ids=[20, 21],
        token_logprobs=[-1.0, -1.5],
        prompt_token_ids=[1, 9690, 198],
        usage=None,
        served_model="base",
        sampling_params={},
    )


def test_a_judge_worker_killed_mid_task_leaves_exactly_one_judgement(
    fake_serving, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a, **k: None)
    user = get_user_model().objects.create_user("alice")
    answer = _answer(user)
    nxt = services.message_append(
        conversation=answer.conversation, role="user", content="No, wrong.", parent=answer
    )
    services.message_link_next_state(turns=[answer], next_state=nxt)
    env = _worker_env(fake_serving, tmp_path)
    first = _start_worker("judge", env)
    try:
        app.send_task("webapp.learning.tasks.judge_message", args=[answer.pk], queue="judge")
        _wait(lambda: FakeServing.calls, timeout=60)  # the worker is inside the task, at the judge
        stop_worker(first)
        assert not Judgement.objects.filter(message=answer).exists()
        second = _start_worker("judge", env)
        try:
            _wait(lambda: Judgement.objects.filter(message=answer).exists(), timeout=120)
            time.sleep(2)
        finally:
            stop_worker(second)
    finally:
        stop_worker(first)
    assert Judgement.objects.filter(message=answer).count() == 1
    assert Sample.objects.filter(message=answer).count() == 1


def test_a_train_worker_killed_mid_update_trains_every_sample_exactly_once(
    fake_serving, prepared_model, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a, **k: None)
    user = get_user_model().objects.create_user("alice")
    samples = feedback_samples(user, 3)
    update = TrainingUpdate.objects.create(
        algorithm="rl", config={"algorithm": "rl"}, base_version=policy_version_live()
    )
    env = _worker_env(fake_serving, tmp_path, prepared_model.parent)
    first = _start_worker("train", env)
    try:
        app.send_task("webapp.learning.tasks.train_update", args=[update.pk], queue="train")
        _wait(lambda: TrainingUpdate.objects.get(pk=update.pk).status == "running", timeout=120)
        time.sleep(3)  # inside the update: loading the model or training
        stop_worker(first)
        assert all(
            s.status == "ready" for s in Sample.objects.filter(pk__in=[s.pk for s in samples])
        )
        second = _start_worker("train", env)
        try:
            _wait(lambda: _settled(update.pk), timeout=600)
        finally:
            stop_worker(second)
    finally:
        stop_worker(first)
    update.refresh_from_db()
    assert update.status in ("done", "rejected"), update.error
    version = PolicyVersion.objects.get(produced_by=update)
    ids = [s.pk for s in samples]
    if update.status == "done":  # trained exactly once, by this update
        assert (
            sorted(
                Sample.objects.filter(update=update, status="consumed").values_list("pk", flat=True)
            )
            == ids
        )
    else:  # refused: every sample given back once, to be trained again
        assert (
            sorted(
                Sample.objects.filter(pk__in=ids, status="ready", refusals=1).values_list(
                    "pk", flat=True
                )
            )
            == ids
        )
    # The probe gate decides from the trained weights (a separate test covers it): the one
    # version is either loaded into serving and live, or refused without being loaded.
    loads = [call for call in FakeServing.calls if call.endswith("/load_lora_adapter")]
    if update.status == "done":
        assert version.status == PolicyVersion.Status.LIVE, version.status
        assert len(loads) == 1
    else:
        assert version.status == PolicyVersion.Status.REJECTED, version.status
        assert loads == [] and version.probe_metrics
