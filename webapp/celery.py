"""The Celery app: queue ``judge`` for judging, queue ``train`` for training (one at a time).

acks_late with prefetch 1: a task is acknowledged only after it ran, so a worker that dies
mid-task leaves it on the broker for the next worker; tasks are written to be idempotent.
"""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

FIRST, NEXT, LATER = 0, 3, 6
"""Message priorities on the broker. Redis has none of its own: kombu keeps one list per
priority step of each queue (0, 3, 6, 9) and a worker takes from the lowest step first (a
message without a priority counts as 0, so every route names one). First what a person waits
for on the page (the answers to compare after a 👎), next judging, later the rest (titles,
the periodic sweeps)."""

app = Celery("parley")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_queues=(Queue("judge"), Queue("train")),
    task_default_queue="judge",
    # Training on its own queue (one worker, concurrency 1); everything else on "judge", where
    # what a person waits for on the page takes the judge worker's next free slot. Exact names
    # are matched before the pattern.
    task_routes={
        "webapp.learning.tasks.maybe_train": {"queue": "train"},
        "webapp.learning.tasks.train_update": {"queue": "train"},
        "webapp.learning.tasks.sample_alternatives": {"queue": "judge", "priority": FIRST},
        "webapp.learning.tasks.judge_message": {"queue": "judge", "priority": NEXT},
        "webapp.chat.tasks.finalize_conversation": {"queue": "judge", "priority": NEXT},
        "*": {"queue": "judge", "priority": LATER},
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
        "close-idle-conversations": {
            "task": "webapp.chat.tasks.close_idle_conversations",
            "schedule": 60.0,
            "options": {"queue": "judge", "expires": 55},
        },
        "maybe-train": {
            "task": "webapp.learning.tasks.maybe_train",
            "schedule": 60.0,
            "options": {"queue": "train", "expires": 55},
        },
        "requeue-pending": {
            "task": "webapp.learning.tasks.requeue_pending",
            "schedule": 300.0,
            "options": {"queue": "judge", "expires": 290},
        },
        # The serving replicas drop versions that are no longer live (after the grace).
        "unload-retired-adapters": {
            "task": "webapp.learning.tasks.unload_retired_adapters",
            "schedule": 60.0,
            "options": {"queue": "judge", "expires": 55},
        },
    },
)
app.autodiscover_tasks()  # tasks.py of each installed app
