"""The periodic sweep: queue again, from the database, whatever a broker outage lost.

The outbox logs and drops a task the broker refused; everything such a task would have done
can be found again here: answers with evidence but no judgement, closed conversations never
finalised, updates still QUEUED (left there, they would block every later update through
the single-flight check), and the answers beside a 👎 still queued or being written long after
(a page may be waiting for them).
"""

from __future__ import annotations

from datetime import timedelta

from webapp.core.outbox import Task, enqueue_each
from webapp.learning import alternatives, services
from webapp.learning.workflows import claiming

UPDATE_QUEUE_GRACE = timedelta(minutes=5)
"""An update queued more recently than this may still have its task in flight: leave it."""
ALTERNATIVES_GRACE = alternatives.STALE_WRITING
"""Answers beside a 👎 queued or being written for longer than this lost their task."""


def requeue_pending() -> dict[str, int]:
    """Queue the judge, conversation finalisation and training work that was never queued."""
    messages = services.messages_awaiting_judgement()
    conversations = services.conversations_awaiting_finalization()
    updates = claiming.training_updates_unqueued(older_than=UPDATE_QUEUE_GRACE)
    stalled = alternatives.alternatives_jobs_stalled(older_than=ALTERNATIVES_GRACE)
    enqueue_each(Task.JUDGE_MESSAGE, messages)
    enqueue_each(Task.FINALIZE_CONVERSATION, conversations)
    enqueue_each(Task.TRAIN_UPDATE, updates)
    enqueue_each(Task.SAMPLE_ALTERNATIVES, stalled)
    return {
        "messages": len(messages),
        "conversations": len(conversations),
        "updates": len(updates),
        "alternatives": len(stalled),
    }
