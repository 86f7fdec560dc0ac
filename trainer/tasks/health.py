"""A task every worker can run: proves a worker consumes a queue end to end."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="trainer.tasks.health.ping", bind=True)
def ping(self, payload: str = "ping") -> dict[str, object]:  # noqa: ANN001 - Celery's bound task
    """Echo the payload with who answered and from which queue."""
    info = self.request.delivery_info or {}
    return {
        "payload": payload,
        "queue": info.get("routing_key", ""),
        "worker": self.request.hostname or socket.gethostname(),
        "pid": os.getpid(),
    }
