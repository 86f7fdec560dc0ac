"""Redis restarted: no learning task is lost.

How: (1) the embedded Redis keeps an append-only file, so queued messages survive a restart or
a crash (``appendfsync everysec``: at most the last second); (2) tasks are acknowledged late
(``acks_late``), so one a worker had taken but not finished is handed out again; (3) when the
broker cannot be reached at all, the user's feedback is still stored (queueing never fails a
request) and the periodic ``judge_pending`` sweep re-queues every turn that has evidence but
no judgement: PostgreSQL is the outbox, and the sweep is its relay.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from collections.abc import Iterator

import pytest
import redis as redis_py
from django.contrib.auth import get_user_model

from tests.factories import AnswerFactory
from webapp.celery import app
from webapp.chat import services
from webapp.chat.models import Feedback
from webapp.infra.embedded import EmbeddedRedis
from webapp.learning.services import turns_awaiting_judgement

pytestmark = [pytest.mark.services, pytest.mark.redis]

JUDGE = "trainer.tasks.judging.judge_message"


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
    client = redis_py.Redis(unix_socket_path=str(server.socket_path))
    try:
        return [json.loads(raw) for raw in client.lrange(queue, 0, -1)]
    finally:
        client.close()


def _tasks(server: EmbeddedRedis) -> list[tuple[str, list]]:
    """(task name, its args) of each message waiting on the judge queue."""
    return [
        (m["headers"]["task"], json.loads(base64.b64decode(m["body"]))[0]) for m in _queued(server)
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


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_feedback_is_stored_and_the_sweep_queues_it_later(broker) -> None:
    from trainer.tasks.judging import judge_pending

    user = get_user_model().objects.create_user("erin")
    answer = AnswerFactory(
        parent__conversation__owner=user,
        parent__content="2+2?",
        content="5",
        token_ids=[1],
        token_logprobs=[-0.1],
        prompt_token_ids=[1],
        usage={},
        sampling_params={},
    )
    broker.stop()
    started = time.monotonic()
    services.feedback_set(message=answer, author=user, rating=-1, comment="It is four, not five.")
    assert time.monotonic() - started < 15  # queueing gave up quickly instead of hanging
    feedback = Feedback.objects.get()
    assert (feedback.rating, feedback.comment) == (-1, "It is four, not five.")
    assert turns_awaiting_judgement() == [answer.pk]

    broker.start()
    assert _tasks(broker) == []  # nothing reached the broker while it was down
    assert judge_pending() == {"turns": 1, "sessions": 0}
    assert _tasks(broker) == [(JUDGE, [answer.pk])]
    assert Feedback.objects.count() == 1
