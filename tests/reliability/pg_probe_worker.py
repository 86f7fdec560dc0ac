"""A Celery app for the PostgreSQL-restart test: Parley's own app plus one task that asks the
database who it is talking to (``celery -A tests.reliability.pg_probe_worker worker``)."""

from __future__ import annotations

from webapp.celery import app

__all__ = ["app", "pg_probe"]


@app.task(name="tests.reliability.pg_probe")
def pg_probe() -> int:
    """The PostgreSQL backend pid of this worker's Django connection."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])
