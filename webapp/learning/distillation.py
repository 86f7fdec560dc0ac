"""Memory samples: every answer a person was given with their memories becomes a context
distillation sample (``Sample.Kind.MEMORY``), feedback or not, so their adapter learns to
answer as if the memories were in its prompt. The one writer of these samples; judged samples
are written by ``webapp.learning.services``.

The sample keeps the answer's served prompt (memories included: the teacher's) and the turn's
messages without them (the student's); its hint is the memories' text as served. It has no
judgement: nothing is judged, the teacher is the signal. A turn that may not train (no consent,
a side turn, a failed answer, a version too far behind) or that holds a secret leaves no ready
sample.
"""

from __future__ import annotations

from django.db import transaction

from trainer.memory_prompt import memory_block
from webapp.chat.models import Message
from webapp.core.outbox import Task, enqueue
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.secret_guard import tool_call_texts, turn_secret
from webapp.learning.services import ineligibility, message_evidence
from webapp.memory.models import Memory
from webapp.memory.services import memories_mark_learnt


def memory_sample_record(*, message_id: int) -> Sample | None:
    """The memory sample of answer ``message_id`` (made once), or None when it has none."""
    message = (
        Message.objects.select_related("conversation", "policy_version")
        .filter(pk=message_id)
        .first()
    )
    if message is None or not message.memories:
        return None
    existing = Sample.objects.filter(message=message, kind=Sample.Kind.MEMORY).first()
    if existing is not None:
        return existing
    if ineligibility(message=message) is not None:
        return None
    evidence = message_evidence(message=message)
    texts = [str(memory.get("text", "")) for memory in message.memories]
    secret = turn_secret(
        prompt_messages=evidence.prompt_messages,
        texts={
            "the answer": evidence.answer,
            "the answer's reasoning": message.reasoning,
            "the answer's tool calls": "\n".join(tool_call_texts(message.tool_calls)),
            "the memories": "\n".join(texts),
        },
    )
    with transaction.atomic():
        Message.objects.select_for_update().filter(pk=message.pk).first()
        if Sample.objects.filter(message=message, kind=Sample.Kind.MEMORY).exists():
            return Sample.objects.get(message=message, kind=Sample.Kind.MEMORY)
        sample = Sample.objects.create(
            message=message,
            judgement=None,
            kind=Sample.Kind.MEMORY,
            reward=0.0,
            hint=memory_block(texts),
            prompt_messages=evidence.prompt_messages,
            prompt_token_ids=message.prompt_token_ids or [],
            response_token_ids=message.token_ids or [],
            response_logprobs=message.token_logprobs or [],
            policy_version=message.policy_version,
            status=Sample.Status.EXCLUDED if secret else Sample.Status.READY,
            exclusion_reason=secret or "",
        )
        if secret is None:
            enqueue(Task.MAYBE_TRAIN)
    return sample


def distilled_memories(*, sample_ids: list[int]) -> list[tuple[int, str]]:
    """(id, text) of the memories the memory samples among ``sample_ids`` distil that are
    still active and not learnt yet, in the order they were made: the gate measures these."""
    given = Message.objects.filter(
        samples__pk__in=sample_ids, samples__kind=Sample.Kind.MEMORY
    ).values_list("memories", flat=True)
    ids = {int(memory["id"]) for memories in given for memory in memories if "id" in memory}
    rows = Memory.objects.filter(pk__in=ids, state=Memory.State.ACTIVE, learnt_in__isnull=True)
    return list(rows.order_by("created_at", "id").values_list("pk", "text"))


def memories_learnt_record(*, version: PolicyVersion) -> int:
    """A version goes live: the memories its gate found learnt (``trainer.memory_gap``) say
    "learnt in version N"; how many."""
    update = TrainingUpdate.objects.filter(produced_version=version).first()
    gaps = (update.summary or {}).get("memory_gaps", []) if update is not None else []
    learnt = [int(figures["id"]) for figures in gaps if figures.get("learnt") and "id" in figures]
    return memories_mark_learnt(memory_ids=learnt, version=version) if learnt else 0
