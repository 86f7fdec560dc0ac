"""The periodic sweep: queue again, from the database, whatever a broker outage lost.

The outbox logs and drops a task the broker refused; everything such a task would have done
can be found again here: answers with evidence but no judgement, closed conversations never
finalised, and updates still QUEUED (left there, they would block every later update through
the single-flight check).
"""

from __future__ import annotations

from datetime import timedelta

from webapp.core.outbox import Task, enqueue_each
from webapp.learning import services
from webapp.learning.workflows import claiming

UPDATE_QUEUE_GRACE = timedelta(minutes=5)
"""An update queued more recently than this may still have its task in flight: leave it."""


def requeue_pending() -> dict[str, int]:
    """Queue the judge, conversation finalisation and training work that was never queued."""
    messages = services.messages_awaiting_judgement()
    conversations = services.conversations_awaiting_finalization()
    updates = claiming.training_updates_unqueued(older_than=UPDATE_QUEUE_GRACE)
    enqueue_each(Task.JUDGE_MESSAGE, messages)
    enqueue_each(Task.FINALIZE_CONVERSATION, conversations)
    enqueue_each(Task.TRAIN_UPDATE, updates)
    return {"messages": len(messages), "conversations": len(conversations), "updates": len(updates)}
