"""The Celery app: queue ``judge`` for judging, queue ``train`` for training (one at a time).

acks_late with prefetch 1: a task is acknowledged only after it ran, so a worker that dies
mid-task leaves it on the broker for the next worker; tasks are written to be idempotent.
"""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("parley")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_queues=(Queue("judge"), Queue("train")),
    task_default_queue="judge",
    task_routes={
        "trainer.tasks.judging.*": {"queue": "judge"},
        "trainer.tasks.training.*": {"queue": "train"},
        "trainer.tasks.publishing.*": {"queue": "train"},
    },
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=3600,
    broker_connection_retry_on_startup=True,
    # An unacknowledged task (its worker died) is handed out again after this many seconds.
    broker_transport_options={
        "visibility_timeout": int(os.environ.get("PARLEY_BROKER_VISIBILITY_TIMEOUT", "3600"))
    },
    worker_hijack_root_logger=False,
    beat_schedule={
        "close-idle-sessions": {
            "task": "trainer.tasks.sessions.close_idle_sessions",
            "schedule": 60.0,
            "options": {"queue": "judge", "expires": 55},
        },
        "maybe-train": {
            "task": "trainer.tasks.training.maybe_train",
            "schedule": 60.0,
            "options": {"queue": "train", "expires": 55},
        },
        "judge-pending": {
            "task": "trainer.tasks.judging.judge_pending",
            "schedule": 300.0,
            "options": {"queue": "judge", "expires": 290},
        },
    },
)
app.autodiscover_tasks(["trainer"], related_name="tasks")
