"""Judging tasks (queue ``judge``): turn evidence into a Judgement and, when it carries a
signal, a training Sample. Each task is a few lines around webapp services and the pure judge."""

from __future__ import annotations

import logging
import time

from celery import shared_task

from trainer.judge import judge_turn as judge_evidence
from trainer.judge_client import JudgeEndpoint, JudgeUnavailable, complete_n

log = logging.getLogger(__name__)


def _endpoint() -> JudgeEndpoint:
    from django.conf import settings

    return JudgeEndpoint(
        base_url=settings.JUDGE_BASE_URL,
        model=settings.JUDGE_MODEL,
        api_key=settings.JUDGE_API_KEY,
        max_tokens=settings.JUDGE_MAX_TOKENS,
        temperature=settings.JUDGE_TEMPERATURE,
        constrained=settings.JUDGE_CONSTRAINED,
    )


def judge_turn(message_id: int, *, session_end: bool = False) -> int | None:
    """Judge one assistant turn; returns the Judgement id (None when it is not to be judged)."""
    from django.conf import settings

    from webapp.chat.models import Message
    from webapp.learning import services

    message = Message.objects.select_related("conversation", "policy_version").get(pk=message_id)
    reason = services.ineligibility(message=message)
    if reason is not None:
        log.info("not judging message %s: %s", message_id, reason)
        return None
    evidence = services.turn_evidence(message=message, session_end=session_end)
    if not (evidence.rating or evidence.user_hint or evidence.correction or evidence.next_state):
        return None
    if services.judgement_exists(message_id=message_id, fingerprint=evidence.fingerprint):
        return None  # a redelivered task: the first run already recorded it
    started = time.monotonic()
    endpoint = _endpoint()
    source = "feedback" if evidence.rating else ("session_end" if evidence.session_end else "prm")
    verdict = judge_evidence(
        kind=settings.JUDGE_KIND,
        request=evidence.request,
        answer=evidence.answer,
        next_state=evidence.next_state,
        rating=evidence.rating,
        user_hint=evidence.user_hint,
        m=settings.JUDGE_VOTES,
        complete=lambda messages, n, choices: complete_n(endpoint, messages, n, choices=choices),
    )
    judgement = services.judgement_record(
        evidence=evidence,
        source=source,
        votes=verdict.votes,
        score=verdict.score,
        hint=verdict.hint,
        hint_votes=verdict.hint_votes,
        judge_model=endpoint.model if settings.JUDGE_KIND == "llm" else "cues",
        prompt_version=verdict.version,
        seconds=time.monotonic() - started,
        keep_without_signal=session_end,
    )
    return judgement.pk


@shared_task(
    name="trainer.tasks.judging.judge_message",
    bind=True,
    max_retries=10,
    autoretry_for=(JudgeUnavailable,),
    retry_backoff=5,
    retry_backoff_max=120,
)
def judge_message(self, message_id: int) -> int | None:  # noqa: ANN001 - Celery's bound task
    """A main turn got its next state, or feedback: judge it."""
    return judge_turn(message_id)


@shared_task(
    name="trainer.tasks.judging.finalize_session",
    bind=True,
    max_retries=10,
    autoretry_for=(JudgeUnavailable,),
    retry_backoff=5,
    retry_backoff_max=120,
)
def finalize_session(self, conversation_id: int) -> int | None:  # noqa: ANN001
    """A session closed: make sure it leaves at least one sample (its best candidate turn)."""
    from webapp.chat.models import Conversation
    from webapp.learning import services

    conversation = Conversation.objects.get(pk=conversation_id)
    candidate = services.session_best_candidate(conversation=conversation)
    if candidate is None:
        return None
    return judge_turn(candidate.pk, session_end=True)


@shared_task(name="trainer.tasks.judging.judge_pending")
def judge_pending() -> dict[str, int]:
    """Periodic sweep: queue whatever a broker outage kept from being queued."""
    from webapp.learning import services

    turns = services.turns_awaiting_judgement()
    sessions = services.sessions_awaiting_finalization()
    for message_id in turns:
        judge_message.delay(message_id)
    for conversation_id in sessions:
        finalize_session.delay(conversation_id)
    return {"turns": len(turns), "sessions": len(sessions)}
