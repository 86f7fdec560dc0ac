"""Celery entry points of the learning loop (found by autodiscovery); each calls one workflow.

Judging runs on queue ``judge``; ``maybe_train`` and ``train_update`` on queue ``train``
(``PARLEY_TRAIN_WORKERS`` worker processes, one update each). Routes are in webapp/celery.py,
names in webapp.core.outbox.Task.
"""

from __future__ import annotations

from celery import Task as CeleryTask
from celery import shared_task
from django.conf import settings

from trainer.judge_client import JudgeUnavailable
from webapp.chat.models import Conversation
from webapp.core.limits import judging_slot
from webapp.core.outbox import Task
from webapp.learning import alternatives, distillation
from webapp.learning.workflows import judging, recovery, residency, together, training

JUDGE_RETRY = {
    "bind": True,
    "max_retries": 10,
    "autoretry_for": (JudgeUnavailable,),
    "retry_backoff": 5,
    "retry_backoff_max": 120,
}
"""Judge tasks retry with backoff while the judge model is unreachable or its owner's judge
work is at its limit (``JudgeBusy``)."""


class JudgeBusy(JudgeUnavailable):
    """The turn's owner already has their share of judge work; the task retries later."""


@shared_task(name=Task.JUDGE_MESSAGE.value, **JUDGE_RETRY)
def judge_message(self: CeleryTask, message_id: int) -> int | None:
    """An answer got its next state, or feedback: judge it, within its owner's judge budget."""
    owner_id = judging.message_owner_id(message_id)
    with judging_slot(user_id=owner_id, work=f"message:{message_id}") as admitted:
        if not admitted:
            raise JudgeBusy(f"the owner of message {message_id} is at their judge work limit")
        return judging.judge_message(message_id, judge=judging.judge_from_settings())


@shared_task(name=Task.FINALIZE_CONVERSATION.value, **JUDGE_RETRY)
def finalize_conversation(self: CeleryTask, conversation_id: int) -> int | None:
    """A conversation closed: make sure it leaves at least one sample (within its owner's
    judge budget, as ``judge_message``)."""
    owner_id = (
        Conversation.objects.filter(pk=conversation_id).values_list("owner_id", flat=True).first()
    )
    with judging_slot(user_id=owner_id, work=f"conversation:{conversation_id}") as admitted:
        if not admitted:
            raise JudgeBusy(f"the owner of conversation {conversation_id} is at their limit")
        return judging.finalize_conversation(conversation_id, judge=judging.judge_from_settings())


@shared_task(name=Task.SAMPLE_ALTERNATIVES.value)
def sample_alternatives(sample_id: int) -> int:
    """A bare 👎: the answers to compare it with (``webapp.learning.alternatives``), at the
    front of the judge queue. Not retried: without them the 👎 still trains, as it did alone;
    their job records why, and the sweep queues again a job whose task was lost."""
    return len(alternatives.alternatives_sample(sample_id=sample_id))


@shared_task(name=Task.DISTIL_MEMORY.value)
def distil_memory(message_id: int) -> int | None:
    """An answer given with the person's memories: its memory sample (the id, or None)."""
    sample = distillation.memory_sample_record(message_id=message_id)
    return sample.pk if sample is not None else None


@shared_task(name=Task.REQUEUE_PENDING.value)
def requeue_pending() -> dict[str, int]:
    """Periodic sweep: queue whatever a broker outage kept from being queued."""
    return recovery.requeue_pending()


@shared_task(name=Task.UNLOAD_RETIRED_ADAPTERS.value)
def unload_retired_adapters() -> dict[str, list[str]]:
    """Periodic sweep: the serving replicas drop versions no longer live (after the grace)."""
    return residency.adapters_unload_retired()


@shared_task(name=Task.MAYBE_TRAIN.value)
def maybe_train() -> list[int]:
    """Queue updates while batches are due and train slots free (after judging, after an
    update, and periodically)."""
    return training.maybe_train()


@shared_task(name=Task.TRAIN_UPDATE.value, bind=True, acks_late=True, max_retries=None)
def train_update(self: CeleryTask, update_id: int) -> int | None:
    """Train, gate and publish one update; returns the new version number."""
    try:
        return training.train_update(
            update_id,
            run=training.train_and_gate,
            together=together.train_and_gate_together if settings.TRAIN_PROCESSES == 1 else None,
            people=settings.TRAIN_PEOPLE_PER_STEP,
        )
    except training.TrainingBusy as busy:
        raise self.retry(countdown=15) from busy
