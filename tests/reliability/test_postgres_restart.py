"""PostgreSQL restarted: a running web process and a running Celery worker carry on without
being restarted themselves.

Both are real processes (daphne serving ``webapp.asgi``, and ``celery worker`` with Parley's
app) on a private embedded PostgreSQL and Redis. While the database is down they fail the
request or the task with a clear error; once it is back the very next request and task
succeed, on a new database connection, from the same process ids. This holds because every
request and every task starts by dropping a broken connection (``CONN_HEALTH_CHECKS`` with
``close_old_connections`` in Django, the Django fixup in Celery), and nothing caches one.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from bench.launching import clean_env, free_port
from tests.helpers import ROOT
from webapp.infra.embedded import EmbeddedPostgres, EmbeddedRedis


@pytest.fixture
def infra(tmp_path) -> Iterator[tuple[EmbeddedPostgres, EmbeddedRedis]]:
    postgres, redis = EmbeddedPostgres(tmp_path / "pg"), EmbeddedRedis(tmp_path / "r")
    postgres.start()
    redis.start()
    yield postgres, redis
    redis.stop()
    postgres.stop()


def _spawn(args: list[str], env: dict[str, str], log) -> subprocess.Popen:
    return subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # noqa: BLE001 - keep polling until the deadline
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"{what} did not happen in {timeout} s (last error: {last!r})")


def _health(url: str) -> tuple[int, dict]:
    response = httpx.get(url + "/healthz", timeout=10)
    return response.status_code, response.json()


def test_web_and_worker_reconnect_after_a_postgres_restart(infra, tmp_path) -> None:
    from celery import Celery

    postgres, redis = infra
    broker = redis.url.replace("unix://", "redis+socket://", 1)
    env = clean_env(
        DATABASE_URL=postgres.url,
        REDIS_URL=redis.url,
        PARLEY_EMBEDDED="1",
        PARLEY_VAR_DIR=str(tmp_path / "var"),
        DJANGO_SETTINGS_MODULE="webapp.settings",
    )
    port = free_port()
    log = (tmp_path / "processes.log").open("w")
    web = _spawn(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "webapp.asgi:application",
        ],
        env,
        log,
    )
    worker = _spawn(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.reliability.pg_probe_worker",
            "worker",
            "-Q",
            "probe",
            "--pool",
            "solo",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "WARNING",
        ],
        env,
        log,
    )
    client = Celery(broker=broker, backend=broker)
    url = f"http://127.0.0.1:{port}"

    def probe(timeout: float = 60) -> int:
        result = client.send_task("tests.reliability.pg_probe", queue="probe")
        return result.get(timeout=timeout)

    try:
        assert _wait(lambda: _health(url)[0] == 200, 60, "web up")
        before = probe()

        postgres.stop()
        status, body = _health(url)
        assert status == 503 and body["status"] == "error"
        with pytest.raises(Exception, match=r"(?i)connect|server|socket"):
            probe(timeout=30)

        assert postgres.start() == postgres.url  # same socket folder: the URL still holds
        assert _health(url) == (200, {"status": "ok", "database": "ok"})
        after = probe()
        assert after != before  # a new connection, made by the same worker process
        assert web.poll() is None and worker.poll() is None
    finally:
        for process in (web, worker):
            process.terminate()
        for process in (web, worker):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        log.close()
        print((tmp_path / "processes.log").read_text()[-3000:])
