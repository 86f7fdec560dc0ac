"""Shared test helpers: Celery workers and stub HTTP servers (the launcher and free ports are
bench.launching's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def start_worker(
    queue: str, name: str, env: dict[str, str], *, app: str = "webapp"
) -> subprocess.Popen[bytes]:
    """A real Celery worker on one queue, in its own process group (so it can be killed whole).
    ``app``: the module of its Celery app (``bench.modelled_training``: updates take a set time
    instead of training)."""
    return subprocess.Popen(
        [
            PYTHON,
            "-m",
            "celery",
            "-A",
            app,
            "worker",
            "-Q",
            queue,
            "-n",
            f"{name}@%h",
            "--concurrency",
            "1",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )


def send_json(handler: Any, payload: object, status: int = 200) -> None:
    """Answer a request of a fake HTTP server (``BaseHTTPRequestHandler``) with JSON."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def database_url() -> str:
    """The URL of the test database this process uses, for worker processes to reach it."""
    from django.db import connection

    db = connection.settings_dict
    auth = quote(db["USER"]) + (":" + quote(db["PASSWORD"]) if db["PASSWORD"] else "")
    host = quote(db["HOST"], safe="") + (f":{db['PORT']}" if db["PORT"] else "")
    return f"postgres://{auth}@{host}/{db['NAME']}"
