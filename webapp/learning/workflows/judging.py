"""Judging: a message's evidence → the judge model → a Judgement and, with a signal, a Sample.

The judge model is asked outside any transaction (it takes seconds); ``judgement_record``
then writes the judgement and its sample in one transaction, idempotently per evidence
fingerprint, so a redelivered task leaves exactly one of each.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from trainer.judge import judge_verdict
from trainer.judge_client import JudgeEndpoint, JudgeRejected, complete_n
from webapp.chat.models import Conversation, Message
from webapp.learning import services
from webapp.learning.secret_guard import turn_secret
from webapp.memory.models import Memory
from webapp.memory.proposing import follow_up_words, memories_propose

log = logging.getLogger(__name__)


class JudgeModel(Protocol):
    """n sampled replies of a judge model to one prompt."""

    @property
    def model(self) -> str: ...

    def complete(
        self, messages: list[dict[str, str]], n: int, choices: tuple[str, ...] | None = None
    ) -> list[str]: ...


@dataclass(frozen=True)
class HttpJudge:
    """The judge model behind an OpenAI-compatible endpoint (trainer.judge_client)."""

    endpoint: JudgeEndpoint

    @property
    def model(self) -> str:
        return self.endpoint.model

    def complete(
        self, messages: list[dict[str, str]], n: int, choices: tuple[str, ...] | None = None
    ) -> list[str]:
        return complete_n(self.endpoint, messages, n, choices=choices)


def judge_from_settings() -> HttpJudge:
    return HttpJudge(
        JudgeEndpoint(
            base_url=settings.JUDGE_BASE_URL,
            model=settings.JUDGE_MODEL,
            api_key=settings.JUDGE_API_KEY,
            max_tokens=settings.JUDGE_MAX_TOKENS,
            temperature=settings.JUDGE_TEMPERATURE,
            constrained=settings.JUDGE_CONSTRAINED,
            priority=settings.JUDGE_PRIORITY,
        )
    )


def judge_message(
    message_id: int, *, judge: JudgeModel, conversation_end: bool = False
) -> int | None:
    """Judge one assistant message; returns the Judgement id (None when it is not judged).

    An answer that cannot be judged with the evidence it has (ineligible, no signal, a request
    the judge refuses) gets the reason recorded, so the periodic sweep stops offering it.
    """
    message = Message.objects.select_related("conversation", "policy_version").get(pk=message_id)
    reason = services.ineligibility(message=message)
    if reason is not None:
        log.info("not judging message %s: %s", message_id, reason)
        if message.status != Message.Status.STREAMING:  # still being written: it may yet be
            services.message_judging_skip(message_id=message_id, reason=reason)
        return None
    evidence = services.message_evidence(message=message, conversation_end=conversation_end)
    if not (evidence.rating or evidence.user_hint or evidence.correction or evidence.next_state):
        services.message_judging_skip(
            message_id=message_id,
            reason=services.NO_SIGNAL,
            fingerprint=evidence.fingerprint,
            conversation_end=conversation_end,
        )
        return None
    if services.judgement_exists(message_id=message_id, fingerprint=evidence.fingerprint):
        return None  # a redelivered task: the first run already recorded it
    started = time.monotonic()
    source = (
        "feedback" if evidence.rating else ("session_end" if evidence.conversation_end else "prm")
    )
    try:
        verdict = judge_verdict(
            kind=settings.JUDGE_KIND,
            request=evidence.request,
            answer=evidence.answer,
            next_state=evidence.next_state,
            rating=evidence.rating,
            user_hint=evidence.user_hint,
            m=settings.JUDGE_VOTES,
            complete=judge.complete,
        )
    except JudgeRejected as refused:  # asking again would be refused again: record, no retry
        log.warning("judge refused message %s: %s", message_id, refused)
        services.message_judging_skip(
            message_id=message_id,
            reason=str(refused),
            fingerprint=evidence.fingerprint,
            conversation_end=conversation_end,
        )
        return None
    # Before the judgement: the page stops asking once it is recorded, and finds them then.
    _propose_memories(message=message, evidence=evidence, judge_hint=verdict.hint)
    judgement = services.judgement_record(
        evidence=evidence,
        source=source,
        votes=verdict.votes,
        score=verdict.score,
        hint=verdict.hint,
        hint_votes=verdict.hint_votes,
        judge_model=judge.model if settings.JUDGE_KIND == "llm" else settings.JUDGE_KIND,
        prompt_version=verdict.version,
        seconds=time.monotonic() - started,
        keep_without_signal=conversation_end,
    )
    return judgement.pk


def _propose_memories(
    *, message: Message, evidence: services.MessageEvidence, judge_hint: str | None
) -> None:
    """Memories proposed from the comment, the correction, and a follow-up the judge took a
    hint from; never from a text that holds a secret."""
    texts = [
        (Memory.Source.COMMENT, evidence.user_hint or ""),
        (Memory.Source.CORRECTION, evidence.correction),
    ]
    if judge_hint and not evidence.user_hint:
        texts.append((Memory.Source.FOLLOW_UP, follow_up_words(evidence.next_state)))
    texts = [
        (source, text)
        for source, text in texts
        if text and turn_secret(prompt_messages=[], texts={"it": text}) is None
    ]
    if texts:
        memories_propose(owner_id=message.conversation.owner_id, message_id=message.pk, texts=texts)


def finalize_conversation(conversation_id: int, *, judge: JudgeModel) -> int | None:
    """A conversation closed: make sure it leaves at least one sample (its best candidate).

    When it cannot (no eligible answer, or the judge refused the candidate), the reason is
    recorded on the conversation so the periodic sweep stops offering it.
    """
    conversation = Conversation.objects.get(pk=conversation_id)
    if services.conversation_has_sample(conversation=conversation):
        return None
    candidate = services.conversation_best_candidate(conversation=conversation)
    if candidate is None:
        services.conversation_finalize_skip(
            conversation_id=conversation_id, reason="no answer that may be trained on"
        )
        return None
    judgement_id = judge_message(candidate.pk, judge=judge, conversation_end=True)
    if judgement_id is None:  # judging again would not change that: the sweep leaves it
        candidate.refresh_from_db(fields=["judging_skip_reason"])
        why = candidate.judging_skip_reason or "already judged on this evidence, without a sample"
        services.conversation_finalize_skip(
            conversation_id=conversation_id, reason=f"answer {candidate.pk}: {why}"
        )
    return judgement_id


def message_owner_id(message_id: int) -> int | None:
    """Whose turn ``message_id`` is: judge work is limited per user (webapp.core.limits)."""
    return (
        Message.objects.filter(pk=message_id)
        .values_list("conversation__owner_id", flat=True)
        .first()
    )
