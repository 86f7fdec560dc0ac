"""The one way to queue background work: by task name, after the transaction commits.

Queueing by name keeps services free of task imports (tasks call workflows, which call
services). A broker that is down never fails the caller: the error is logged and the periodic
sweep (``webapp.learning.tasks.requeue_pending``) finds the work again from the database —
answers awaiting judgement, closed conversations never finalised, updates left QUEUED.
Queues come from ``task_routes`` in webapp/celery.py, never from the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from enum import StrEnum

from django.db import transaction

from webapp.celery import app

log = logging.getLogger(__name__)


class Task(StrEnum):
    """Every task that is queued by name (the names Celery registers them under)."""

    JUDGE_MESSAGE = "webapp.learning.tasks.judge_message"
    MAYBE_TRAIN = "webapp.learning.tasks.maybe_train"
    DISTIL_MEMORY = "webapp.learning.tasks.distil_memory"
    TRAIN_UPDATE = "webapp.learning.tasks.train_update"
    REQUEUE_PENDING = "webapp.learning.tasks.requeue_pending"
    SAMPLE_ALTERNATIVES = "webapp.learning.tasks.sample_alternatives"
    UNLOAD_RETIRED_ADAPTERS = "webapp.learning.tasks.unload_retired_adapters"
    # Defined in webapp/learning/tasks.py, under the name that messages on the broker carry.
    FINALIZE_CONVERSATION = "webapp.chat.tasks.finalize_conversation"
    CLOSE_IDLE_CONVERSATIONS = "webapp.chat.tasks.close_idle_conversations"
    SUGGEST_CONVERSATION_TITLE = "webapp.chat.tasks.suggest_conversation_title"
    PING = "webapp.core.tasks.ping"


def send(task: Task, args: tuple[int, ...]) -> bool:
    """Hand the task to the broker now; False (logged) when the broker refused it."""
    try:
        app.send_task(str(task), args=list(args))
    except Exception:
        log.warning("could not queue %s%s; the periodic sweep will", task, args, exc_info=True)
        return False
    return True


def enqueue(task: Task, *args: int) -> None:
    """Queue ``task(*args)`` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send(task, args))


def enqueue_each(task: Task, ids: Iterable[int]) -> None:
    """``enqueue(task, id)`` for each id."""
    for pk in ids:
        enqueue(task, pk)
