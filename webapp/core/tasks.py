"""A task every worker can run: proves a worker consumes a queue end to end."""

from __future__ import annotations

import os
import socket

from celery import Task as CeleryTask
from celery import shared_task

from webapp.core.outbox import Task


@shared_task(name=Task.PING.value, bind=True)
def ping(self: CeleryTask, payload: str = "ping") -> dict[str, object]:
    """Echo the payload with who answered and from which queue."""
    info = self.request.delivery_info or {}
    return {
        "payload": payload,
        "queue": info.get("routing_key", ""),
        "worker": self.request.hostname or socket.gethostname(),
        "pid": os.getpid(),
    }
