"""The outbox queues after commit, by name, routed by the Celery app; a broker that is down
never fails the caller."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from webapp.celery import app
from webapp.core import outbox
from webapp.core.outbox import Task

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def broker_down(monkeypatch):
    """The Celery app pointed at a port nothing listens on (its cached pools forgotten)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(app.conf, "broker_url", f"redis://127.0.0.1:{port}/0")
    monkeypatch.setattr(app, "_pool", None)
    monkeypatch.setattr(app.amqp, "_producer_pool", None)


def test_with_the_broker_down_queueing_logs_and_returns(broker_down, caplog) -> None:
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="webapp.core.outbox"):
        assert outbox.send(Task.JUDGE_MESSAGE, (7,)) is False
    assert time.monotonic() - started < 15
    assert "could not queue webapp.learning.tasks.judge_message(7,)" in caplog.text


def test_nothing_is_queued_before_the_commit(
    monkeypatch, django_capture_on_commit_callbacks
) -> None:
    sent: list[tuple[str, tuple[int, ...]]] = []
    monkeypatch.setattr(outbox, "send", lambda task, args: sent.append((str(task), args)))
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        outbox.enqueue_each(Task.JUDGE_MESSAGE, [1, 2])
        outbox.enqueue(Task.MAYBE_TRAIN)
        assert sent == []
    assert len(callbacks) == 3
    assert sent == [(Task.JUDGE_MESSAGE, (1,)), (Task.JUDGE_MESSAGE, (2,)), (Task.MAYBE_TRAIN, ())]


def test_training_tasks_route_to_the_train_queue_and_the_rest_to_judge() -> None:
    route = app.amqp.router.route
    for task, queue in [
        (Task.TRAIN_UPDATE, "train"),
        (Task.MAYBE_TRAIN, "train"),
        (Task.JUDGE_MESSAGE, "judge"),
        (Task.FINALIZE_CONVERSATION, "judge"),
        (Task.REQUEUE_PENDING, "judge"),
        (Task.UNLOAD_RETIRED_ADAPTERS, "judge"),
    ]:
        assert route({}, str(task))["queue"].name == queue


def test_every_queued_task_name_is_a_registered_task() -> None:
    app.loader.import_default_modules()
    assert {str(task) for task in Task} <= set(app.tasks)
