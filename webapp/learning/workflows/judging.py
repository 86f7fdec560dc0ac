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
from trainer.judge_client import JudgeEndpoint, complete_n
from webapp.chat.models import Conversation, Message
from webapp.learning import services

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
    """Judge one assistant message; returns the Judgement id (None when it is not judged)."""
    message = Message.objects.select_related("conversation", "policy_version").get(pk=message_id)
    reason = services.ineligibility(message=message)
    if reason is not None:
        log.info("not judging message %s: %s", message_id, reason)
        return None
    evidence = services.message_evidence(message=message, conversation_end=conversation_end)
    if not (evidence.rating or evidence.user_hint or evidence.correction or evidence.next_state):
        return None
    if services.judgement_exists(message_id=message_id, fingerprint=evidence.fingerprint):
        return None  # a redelivered task: the first run already recorded it
    started = time.monotonic()
    source = (
        "feedback" if evidence.rating else ("session_end" if evidence.conversation_end else "prm")
    )
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
    judgement = services.judgement_record(
        evidence=evidence,
        source=source,
        votes=verdict.votes,
        score=verdict.score,
        hint=verdict.hint,
        hint_votes=verdict.hint_votes,
        judge_model=judge.model if settings.JUDGE_KIND == "llm" else "cues",
        prompt_version=verdict.version,
        seconds=time.monotonic() - started,
        keep_without_signal=conversation_end,
    )
    return judgement.pk


def finalize_conversation(conversation_id: int, *, judge: JudgeModel) -> int | None:
    """A conversation closed: make sure it leaves at least one sample (its best candidate)."""
    conversation = Conversation.objects.get(pk=conversation_id)
    candidate = services.conversation_best_candidate(conversation=conversation)
    if candidate is None:
        return None
    return judge_message(candidate.pk, judge=judge, conversation_end=True)


def message_owner_id(message_id: int) -> int | None:
    """Whose turn ``message_id`` is: judge work is limited per user (webapp.core.limits)."""
    return (
        Message.objects.filter(pk=message_id)
        .values_list("conversation__owner_id", flat=True)
        .first()
    )
