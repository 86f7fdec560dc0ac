"""Queueing learning work once a transaction commits. A broker that is down never fails the
user's request: the periodic sweep (``judge_pending``) picks up what was not queued."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction

log = logging.getLogger(__name__)


def _send(task_name: str, arg: int | None, queue: str = "judge") -> None:
    from webapp.celery import app

    try:
        app.send_task(task_name, args=[] if arg is None else [arg], queue=queue)
    except Exception:
        log.warning(
            "could not queue %s(%s); the periodic sweep will", task_name, arg, exc_info=True
        )


def queue_judgement(*, message_ids: Iterable[int]) -> None:
    for message_id in message_ids:
        transaction.on_commit(lambda m=message_id: _send("trainer.tasks.judging.judge_message", m))


def queue_session_end(*, conversation_ids: Iterable[int]) -> None:
    for conversation_id in conversation_ids:
        transaction.on_commit(
            lambda c=conversation_id: _send("trainer.tasks.judging.finalize_session", c)
        )


def queue_training_check() -> None:
    """A new sample: see whether enough are ready for an update (on the train queue)."""
    transaction.on_commit(lambda: _send("trainer.tasks.training.maybe_train", None, "train"))
