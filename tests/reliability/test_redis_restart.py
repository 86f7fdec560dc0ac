"""Redis restarted: no learning task is lost.

How: (1) the embedded Redis keeps an append-only file, so queued messages survive a restart or
a crash (``appendfsync everysec``: at most the last second); (2) tasks are acknowledged late
(``acks_late``), so one a worker had taken but not finished is handed out again; (3) when the
broker cannot be reached at all, the user's feedback is still stored (queueing never fails a
request) and the periodic ``requeue_pending`` sweep re-queues every answer that has evidence but
no judgement, and every update left QUEUED: PostgreSQL is the outbox, and the sweep is its relay.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis as redis_py
from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.factories import AnswerFactory
from webapp.celery import app
from webapp.chat.feedback import feedback_set
from webapp.chat.models import Feedback, Message
from webapp.infra.embedded import EmbeddedRedis
from webapp.learning.models import Judgement, Sample, TrainingUpdate
from webapp.learning.services import messages_awaiting_judgement
from webapp.learning.workflows import claiming
from webapp.learning.workflows.recovery import requeue_pending

pytestmark = [pytest.mark.services, pytest.mark.redis]

JUDGE = "webapp.learning.tasks.judge_message"


@pytest.fixture
def own_redis(tmp_path) -> Iterator[EmbeddedRedis]:
    """A private embedded Redis (short path: unix sockets allow ~100 characters)."""
    server = EmbeddedRedis(tmp_path / "r")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def broker(own_redis) -> Iterator[EmbeddedRedis]:
    """The Celery app publishing to ``own_redis`` for this test, then as before."""
    url = own_redis.url.replace("unix://", "redis+socket://", 1)
    before = app.conf.broker_url

    def reset_pools() -> None:
        # Forget the cached pools; kombu keeps one per broker address, so none is closed here.
        app._pool = None
        app.amqp._producer_pool = None

    app.conf.broker_url = url
    reset_pools()
    yield own_redis
    app.conf.broker_url = before
    reset_pools()


def _queued(server: EmbeddedRedis, queue: str = "judge") -> list[dict]:
    """The messages waiting on ``queue``, in the order a worker takes them: kombu keeps one
    list per priority step (webapp/celery.py), lowest first, each popped from its right end."""
    client = redis_py.Redis(unix_socket_path=str(server.socket_path))
    lists = [queue, *(f"{queue}\x06\x16{step}" for step in (3, 6, 9))]
    try:
        return [json.loads(raw) for key in lists for raw in reversed(client.lrange(key, 0, -1))]
    finally:
        client.close()


def _tasks(server: EmbeddedRedis, queue: str = "judge") -> list[tuple[str, list]]:
    """(task name, its args) of each message waiting on the queue."""
    return [
        (m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0])
        for m in _queued(server, queue)
    ]


def test_a_queued_task_survives_a_clean_restart(broker) -> None:
    app.send_task(JUDGE, args=[41], queue="judge")
    assert _tasks(broker) == [(JUDGE, [41])]
    broker.stop()
    broker.start()
    assert _tasks(broker) == [(JUDGE, [41])]


def test_a_queued_task_survives_redis_being_killed(broker) -> None:
    app.send_task(JUDGE, args=[42], queue="judge")
    time.sleep(1.5)  # appendfsync everysec: what was written a second ago is on disk
    os.kill(broker._client.pid, signal.SIGKILL)
    broker.stop()  # forgets the dead server (its shutdown call fails quietly)
    broker.start()
    assert _tasks(broker) == [(JUDGE, [42])]


def _answer(user) -> Message:
    """A finished answer to "2+2?" in a new conversation of ``user``."""
    return AnswerFactory(
        parent__conversation__owner=user,
        parent__content="2+2?",
        content="5",
        token_ids=[1],
        token_logprobs=[-0.1],
        prompt_token_ids=[1],
        usage={},
        sampling_params={},
    )


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_feedback_is_stored_and_the_sweep_queues_it_later(
    broker, settings
) -> None:
    settings.MODEL_TITLES = False  # only the judge's task is followed here
    user = get_user_model().objects.create_user("erin")
    answer = _answer(user)
    broker.stop()
    started = time.monotonic()
    feedback_set(message=answer, author=user, rating=-1, comment="It is four, not five.")
    assert time.monotonic() - started < 15  # queueing gave up quickly instead of hanging
    feedback = Feedback.objects.get()
    assert (feedback.rating, feedback.comment) == (-1, "It is four, not five.")
    assert messages_awaiting_judgement() == [answer.pk]

    broker.start()
    assert _tasks(broker) == []  # nothing reached the broker while it was down
    assert requeue_pending() == {
        "messages": 1,
        "conversations": 0,
        "updates": 0,
        "alternatives": 0,
    }
    assert _tasks(broker) == [(JUDGE, [answer.pk])]
    assert Feedback.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_a_queued_update_is_not_lost_and_the_sweep_queues_it_again(
    broker, settings
) -> None:
    settings.TRAIN_BATCH_SIZE = 1
    answer = _answer(get_user_model().objects.create_user("fred"))
    judgement = Judgement.objects.create(message=answer, fingerprint="f", source="feedback")
    Sample.objects.create(message=answer, judgement=judgement, kind="rl", reward=1.0)
    broker.stop()
    update = claiming.training_update_maybe_queue()  # its task cannot reach the broker
    assert update is not None
    assert TrainingUpdate.objects.get().status == "queued"  # the work is still recorded
    assert claiming.training_update_maybe_queue(force=True) is None  # and holds single flight

    broker.start()
    assert _tasks(broker, "train") == []
    # Within the grace period the task may still be in flight: the sweep leaves it alone.
    assert requeue_pending()["updates"] == 0
    TrainingUpdate.objects.filter(pk=update.pk).update(
        created_at=timezone.now() - timedelta(minutes=10)
    )
    assert requeue_pending()["updates"] == 1
    assert _tasks(broker, "train") == [("webapp.learning.tasks.train_update", [update.pk])]
