"""The embedded PostgreSQL and Redis start, take connections, stop, and keep their data."""

from __future__ import annotations

from pathlib import Path

import psutil
import psycopg
import redis

from webapp.config import database_from_url
from webapp.infra.embedded import EmbeddedPostgres, EmbeddedRedis


def _connect(url: str) -> psycopg.Connection:
    db = database_from_url(url)
    return psycopg.connect(host=db["HOST"], user=db["USER"], dbname=db["NAME"], autocommit=True)


def _postgres_running_on(data_dir: Path) -> bool:
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(data_dir) in " ".join(
            proc.info["cmdline"] or []
        ):
            return True
    return False


def test_embedded_postgres_keeps_a_row_across_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    server = EmbeddedPostgres(data_dir)
    url = server.start()
    with _connect(url) as conn:
        conn.execute("CREATE TABLE note (body text)")
        conn.execute("INSERT INTO note VALUES ('written before the restart')")
    server.stop()
    assert not _postgres_running_on(data_dir.resolve())

    again = EmbeddedPostgres(data_dir)
    url = again.start()
    try:
        with _connect(url) as conn:
            assert conn.execute("SELECT body FROM note").fetchall() == [
                ("written before the restart",)
            ]
    finally:
        again.stop()
    assert not _postgres_running_on(data_dir.resolve())


def test_embedded_redis_keeps_a_key_across_a_restart(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    url = server.start()
    client = redis.Redis.from_url(url)
    client.set("parley:test", "kept")
    client.rpush("parley:queue", "task-1", "task-2")
    client.close()
    server.stop()
    assert not server.socket_path.exists() or not _answers(url)

    again = EmbeddedRedis(tmp_path / "redis")
    url = again.start()
    try:
        client = redis.Redis.from_url(url)
        assert client.get("parley:test") == b"kept"
        assert client.lrange("parley:queue", 0, -1) == [b"task-1", b"task-2"]
        client.close()
    finally:
        again.stop()


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def test_a_command_run_beside_a_running_parley_leaves_its_services_up(
    tmp_path: Path, monkeypatch
) -> None:
    """`launcher exec` (make test, a benchmark) beside `make run` on the same var/ borrows the
    running PostgreSQL and Redis; a second embedded Redis on the same files would be the
    running one, and stopping it took the running system's broker away."""
    import sys

    from webapp.infra.launcher import exec_with_infra, infrastructure, running_infrastructure

    for name in ("DATABASE_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    var = tmp_path / "var"
    monkeypatch.setenv("PARLEY_VAR_DIR", str(var))
    assert running_infrastructure(var) is None  # nothing running: exec starts its own
    with infrastructure(var) as running:
        borrowed = running_infrastructure(var)
        assert borrowed is not None
        assert (borrowed["DATABASE_URL"], borrowed["REDIS_URL"]) == (
            running["DATABASE_URL"],
            running["REDIS_URL"],
        )
        code = "import os, redis; redis.Redis.from_url(os.environ['REDIS_URL']).set('k', 'v')"
        assert exec_with_infra([sys.executable, "-c", code]) == 0
        # Still up, with what the command wrote.
        assert redis.Redis.from_url(running["REDIS_URL"]).get("k") == b"v"
        with _connect(running["DATABASE_URL"]) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_borrowed_external_database_is_not_taken_for_the_embedded_one(
    tmp_path: Path, monkeypatch
) -> None:
    """A `make run` on DATABASE_URL/REDIS_URL writes its infra file too: a command beside it
    gets those URLs and production's defaults, not embedded mode's (open sign-up, no HTTPS)."""
    from webapp.infra.embedded import write_infra_file
    from webapp.infra.launcher import running_infrastructure

    for name in ("DATABASE_URL", "REDIS_URL", "PARLEY_EMBEDDED"):
        monkeypatch.delenv(name, raising=False)
    var = tmp_path / "var"
    postgres, redis_server = EmbeddedPostgres(var / "pg"), EmbeddedRedis(var / "redis")
    database_url, redis_url = postgres.start(), redis_server.start()
    try:
        write_infra_file(var, database_url=database_url, redis_url=redis_url, embedded=False)
        env = running_infrastructure(var)
        assert env is not None and "PARLEY_EMBEDDED" not in env
        assert env["DATABASE_URL"] == database_url
        (var / "run" / "infra.json").write_text("{not json")
        assert running_infrastructure(var) is None
    finally:
        redis_server.stop()
        postgres.stop()
