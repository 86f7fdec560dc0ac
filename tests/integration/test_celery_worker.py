"""A real Celery worker on the real broker answers the health task on both queues."""

from __future__ import annotations

import os
import subprocess

import pytest

from bench.launching import start_worker
from webapp.core.tasks import ping

pytestmark = [pytest.mark.services, pytest.mark.redis]


@pytest.fixture(scope="module")
def workers():
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = [start_worker(queue, f"test-{queue}", env) for queue in ("judge", "train")]
    yield procs
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.parametrize("queue", ["judge", "train"])
def test_the_health_task_runs_on_each_queue(workers, queue: str) -> None:
    result = ping.apply_async(args=[f"hello {queue}"], queue=queue).get(timeout=120)
    assert result["payload"] == f"hello {queue}"
    assert result["queue"] == queue
    assert result["worker"].startswith(f"test-{queue}@")
