"""Shared test helpers: stub HTTP servers and the test database's URL (the launcher, Celery
workers and free ports are bench.launching's)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent


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


def stack_rows_when(
    stack: Any, query: str, params: tuple, check: Any, timeout: float = 900
) -> list:
    """The rows of ``query`` on the running stack once ``check(rows)`` holds (polled every 2 s);
    an AssertionError with the last rows after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    rows: list = []
    while time.monotonic() < deadline:
        rows = stack.sql(query, params)
        if check(rows):
            return rows
        time.sleep(2)
    raise AssertionError(f"timed out; last rows: {rows}")
