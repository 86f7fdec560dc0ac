"""From judged messages to training samples: evidence, eligibility, and the one writer of
``Judgement`` and judged ``Sample``s (memory samples: ``webapp.learning.distillation``).

The judging workflow (``webapp.learning.workflows.judging``) reads a message's evidence here,
asks the judge model (outside any transaction: it takes seconds), then calls
``judgement_record``, which writes the judgement and its sample in one transaction,
idempotently: the evidence fingerprint is unique per message, so a redelivered task leaves
exactly one row of each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from webapp.chat.envelope import user_words
from webapp.chat.models import Conversation, Feedback, Message
from webapp.chat.selectors import prompt_path
from webapp.core.outbox import Task, enqueue, enqueue_each
from webapp.learning.alternatives import (
    alternatives_queue,
    chosen_fingerprint,
    unseen_fingerprint,
)
from webapp.learning.evidence import evidence_facts, evidence_fingerprint
from webapp.learning.models import Judgement, Sample
from webapp.learning.notify import push_learning_status
from webapp.learning.secret_guard import tool_call_texts, turn_secret
from webapp.learning.selectors import lineage_owner_id, policy_version_live, versions_behind

CONVERSATION_END_STATE = "(The user ended the conversation here without replying.)"


@dataclass(frozen=True)
class MessageEvidence:
    """What the judge sees for one assistant turn, and what the user said about it."""

    message_id: int
    request: str
    answer: str
    next_state: str
    next_state_id: int | None
    rating: int
    user_hint: str | None
    correction: str
    conversation_end: bool
    fingerprint: str
    prompt_messages: list[dict[str, Any]] = field(default_factory=list)


def ineligibility(*, message: Message) -> str | None:
    """Why this turn may never become a sample, or None when it may."""
    if message.role != Message.Role.ASSISTANT:
        return "not an assistant answer"
    if message.turn_type != Message.TurnType.MAIN:
        return "side turn"
    if not message.conversation.train_consent:
        return "the conversation is not used for training"
    if message.status not in (Message.Status.COMPLETE, Message.Status.STOPPED):
        return f"answer {message.status}"
    if not message.token_ids:
        return "no sampled tokens recorded"
    version = message.policy_version
    live = policy_version_live(owner_id=lineage_owner_id(user=message.conversation.owner_id))
    lag = versions_behind(version=version, live=live) if version is not None else 0
    if lag > settings.SAMPLE_MAX_VERSION_LAG:
        return f"served by {version.label}, more than {settings.SAMPLE_MAX_VERSION_LAG} behind"
    return None


def _next_state_text(next_state: Message) -> str:
    """The next state: that message and the ones sent with it (parallel tool results)."""
    parts = []
    current: Message | None = next_state
    while current is not None and current.role != Message.Role.ASSISTANT:
        if current.role == Message.Role.TOOL:
            parts.append(f"[tool result {current.tool_call_id}] {current.content}")
        elif words := user_words(current.content):  # an agent's own context is no next state
            parts.append(f"[user] {words}")
        current = current.children.filter(selected=True).first()
    return "\n".join(parts)


def message_evidence(*, message: Message, conversation_end: bool = False) -> MessageEvidence:
    path = prompt_path(message=message)
    request = next(
        (
            words
            for m in reversed(path[:-1])
            if m.role == "user" and (words := user_words(m.content))
        ),
        "",
    )
    answer = message.content
    if message.tool_calls:
        answer += "\n[tool calls] " + json.dumps(message.tool_calls, ensure_ascii=False)
    feedback = Feedback.objects.filter(message=message, author=message.conversation.owner).first()
    facts = evidence_facts(
        next_state_id=message.next_state_id, feedback=feedback, conversation_end=conversation_end
    )
    rating, user_hint, correction = facts["rating"], facts["hint"], facts["correction"]
    if message.next_state_id:
        next_state = _next_state_text(message.next_state)
    elif feedback is not None and feedback.comment:
        next_state = f"[user feedback] {feedback.comment}"
    else:
        next_state = CONVERSATION_END_STATE if conversation_end else ""
    return MessageEvidence(
        message_id=message.pk,
        request=request,
        answer=answer,
        next_state=next_state,
        next_state_id=message.next_state_id,
        rating=rating,
        user_hint=user_hint,
        correction=correction,
        conversation_end=bool(facts["end"]),
        fingerprint=evidence_fingerprint(facts),
        # As the served prompt had them: failed answers were never shown to the model.
        prompt_messages=[
            m.as_openai()
            for m in path[:-1]
            if not (m.is_assistant and m.status == Message.Status.FAILED)
        ],
    )


def judgement_exists(*, message_id: int, fingerprint: str) -> bool:
    return Judgement.objects.filter(message_id=message_id, fingerprint=fingerprint).exists()


def _sample_kind(reward: float, hint: str | None, correction: str) -> str | None:
    has_hint = bool(hint or correction)
    if reward and has_hint:
        return Sample.Kind.COMBINED
    if reward:
        return Sample.Kind.RL
    if has_hint:
        return Sample.Kind.OPD
    return None


@transaction.atomic
def judgement_record(
    *,
    evidence: MessageEvidence,
    source: str,
    votes: list[dict[str, Any]],
    score: int,
    hint: str | None,
    hint_votes: list[str],
    judge_model: str,
    prompt_version: str,
    seconds: float,
    keep_without_signal: bool = False,
) -> Judgement:
    """Write the judgement and (when the turn is eligible and has a signal) its sample.

    Idempotent on (message, evidence fingerprint). A newer judgement of the same message
    supersedes its older ready samples; consumed ones stay as trained. A turn that holds a
    secret gets its sample excluded from the start (read before the row is locked).
    """
    secret = _turn_secret(evidence, hint)
    message = (
        Message.objects.select_for_update(of=("self",))
        .select_related("conversation", "policy_version")
        .get(pk=evidence.message_id)
    )
    existing = Judgement.objects.filter(message=message, fingerprint=evidence.fingerprint).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            judgement = Judgement.objects.create(
                message=message,
                fingerprint=evidence.fingerprint,
                source=source,
                votes=votes,
                score=score,
                hint=hint or "",
                hint_votes=hint_votes,
                judge_model=judge_model,
                prompt_version=prompt_version,
                next_state_text=evidence.next_state,
                seconds=seconds,
            )
    except IntegrityError:
        return Judgement.objects.get(message=message, fingerprint=evidence.fingerprint)
    push_learning_status(messages=[(message.conversation_id, message.pk)])
    if message.judging_skip_reason:
        message.judging_skip_reason = ""
        message.save(update_fields=["judging_skip_reason"])
    if ineligibility(message=message) is not None:
        return judgement
    kind = _sample_kind(float(score), hint, evidence.correction)
    if kind is None and keep_without_signal:
        kind = Sample.Kind.RL
    if kind is None:
        return judgement
    judged = Sample.objects.filter(message=message).exclude(kind=Sample.Kind.MEMORY)
    judged.filter(status=Sample.Status.READY).update(
        status=Sample.Status.SUPERSEDED,
        exclusion_reason=f"superseded by judgement {judgement.pk} of the same answer",
    )
    sample = Sample.objects.create(
        message=message,
        judgement=judgement,
        kind=kind,
        reward=float(score),
        hint=hint or "",
        correction=evidence.correction,
        prompt_messages=evidence.prompt_messages,
        prompt_token_ids=message.prompt_token_ids or [],
        response_token_ids=message.token_ids or [],
        response_logprobs=message.token_logprobs or [],
        group_key=str(message.parent_id or ""),
        policy_version=message.policy_version,
        status=Sample.Status.EXCLUDED if secret else Sample.Status.READY,
        exclusion_reason=secret or "",
    )
    if secret is None:
        enqueue(Task.MAYBE_TRAIN)
        alternatives_queue(sample=sample)
    return judgement


def _turn_secret(evidence: MessageEvidence, hint: str | None) -> str | None:
    """Why this turn may not train because of a secret it holds (secret_guard), or None."""
    reasoning, tool_calls = (
        Message.objects.filter(pk=evidence.message_id).values_list("reasoning", "tool_calls").get()
    )
    return turn_secret(
        prompt_messages=evidence.prompt_messages,
        texts={
            "the answer": evidence.answer,
            "the answer's reasoning": reasoning,
            "the answer's tool calls": "\n".join(tool_call_texts(tool_calls)),
            "the correction": evidence.correction,
            "the comment": evidence.user_hint,
            "the next message": evidence.next_state,
            "the judge's hint": hint,
        },
    )


def conversation_has_sample(*, conversation: Conversation) -> bool:
    return Sample.objects.filter(message__conversation=conversation).exists()


def conversation_best_candidate(*, conversation: Conversation) -> Message | None:
    """The answer kept when a conversation closes without any sample: its last eligible main answer.

    "Best" = most recent, because it is the turn with the least context lost, and the one the
    user saw last (docs/learning.md explains the choice).
    """
    if conversation_has_sample(conversation=conversation):
        return None
    answers = (
        conversation.messages.filter(role=Message.Role.ASSISTANT, turn_type=Message.TurnType.MAIN)
        .select_related("conversation", "policy_version")
        .order_by("-created_at")
    )
    for answer in answers:
        if ineligibility(message=answer) is None:
            return answer
    return None


def sample_exclude(*, sample: Sample, reason: str = "excluded by an admin") -> Sample:
    if sample.status == Sample.Status.READY:
        sample.status = Sample.Status.EXCLUDED
        sample.exclusion_reason = reason
        sample.save(update_fields=["status", "exclusion_reason"])
    return sample


SKIP_REASON_MAX = 300


NO_SIGNAL = "no signal"


@transaction.atomic
def message_judging_skip(
    *, message_id: int, reason: str, fingerprint: str | None = None, conversation_end: bool = False
) -> bool:
    """Record why the judge leaves this answer alone, so the sweep stops offering it.

    ``fingerprint`` is the evidence the decision was made on: when new evidence arrived
    meanwhile (the row lock orders this against ``feedback_set`` and next-state linking, which
    clear the reason), nothing is recorded and the answer stays sweepable. Returns whether the
    reason was recorded.
    """
    message = (
        Message.objects.select_for_update(of=("self",))
        .select_related("conversation", "policy_version")
        .get(pk=message_id)
    )
    if fingerprint is not None:
        now = message_evidence(message=message, conversation_end=conversation_end)
        if now.fingerprint != fingerprint:
            return False
    message.judging_skip_reason = reason[:SKIP_REASON_MAX]
    message.save(update_fields=["judging_skip_reason"])
    # the answer's status stops saying "Parley is reading it"
    push_learning_status(messages=[(message.conversation_id, message.pk)])
    if reason == NO_SIGNAL:
        # The feedback was withdrawn: what it made is not trained (nor what was sampled beside
        # a 👎 to compare it with, nor the one chosen among those).
        beside = [unseen_fingerprint(message_id), chosen_fingerprint(message_id)]
        Sample.objects.filter(
            Q(message_id=message_id) | Q(judgement__fingerprint__in=beside),
            status=Sample.Status.READY,
        ).update(status=Sample.Status.SUPERSEDED, exclusion_reason="the feedback was withdrawn")
    return True


def conversation_finalize_skip(*, conversation_id: int, reason: str) -> None:
    """Record why closing this conversation left no sample (the sweep stops offering it)."""
    Conversation.objects.filter(pk=conversation_id).update(
        finalize_skip_reason=reason[:SKIP_REASON_MAX]
    )


def messages_awaiting_judgement(*, limit: int = 200) -> list[int]:
    """Main answers with a next state or feedback but no judgement yet (missed queueing).

    Answers the judge already left alone with a reason (``judging_skip_reason``) are not
    offered again until new evidence clears it: otherwise enough of them at the head of the
    queue would keep every later missed answer out of the sweep for good.
    """
    return list(
        Message.objects.filter(
            role=Message.Role.ASSISTANT,
            turn_type=Message.TurnType.MAIN,
            conversation__train_consent=True,
            judgements__isnull=True,
            judging_skip_reason="",
        )
        .filter(Q(next_state__isnull=False) | Q(feedback__isnull=False))
        .order_by("created_at")
        .values_list("pk", flat=True)
        .distinct()[:limit]
    )


def conversations_awaiting_finalization(*, limit: int = 100) -> list[int]:
    """Closed, consented conversations that have no sample and no session-end judgement, and
    that finalising has not already found nothing to keep in (``finalize_skip_reason``)."""
    return list(
        Conversation.objects.filter(
            closed_at__isnull=False, train_consent=True, finalize_skip_reason=""
        )
        .exclude(messages__samples__isnull=False)
        .exclude(messages__judgements__source=Judgement.Source.SESSION_END)
        .order_by("closed_at")
        .values_list("pk", flat=True)
        .distinct()[:limit]
    )


@dataclass(frozen=True)
class RejudgeRequest:
    """What an admin's "re-judge" did: the answers queued, and why others were not."""

    queued: list[int]
    unchanged: list[int]
    skipped: dict[int, str]


def messages_rejudge(*, messages: Iterable[Message]) -> RejudgeRequest:
    """Queue the judge again for these answers (the admin's "Re-judge" action).

    Judging is idempotent per evidence fingerprint: an answer whose next state and feedback have
    not changed since its last judgement keeps that judgement (the task finds it and stops), so
    ``unchanged`` lists those answers for the admin to be told. Answers that may never become
    samples are skipped with the reason.
    """
    queued: list[int] = []
    unchanged: list[int] = []
    skipped: dict[int, str] = {}
    for message in messages:
        reason = ineligibility(message=message)
        if reason is not None:
            skipped[message.pk] = reason
            continue
        queued.append(message.pk)
        evidence = message_evidence(message=message)
        if judgement_exists(message_id=message.pk, fingerprint=evidence.fingerprint):
            unchanged.append(message.pk)
    enqueue_each(Task.JUDGE_MESSAGE, queued)
    return RejudgeRequest(queued=queued, unchanged=unchanged, skipped=skipped)
