"""The periodic sweep cannot be jammed: answers and conversations that can never be judged are
recorded with the reason and left out, so a real missed turn behind them is still swept."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.factories import AnswerFactory
from trainer.judge_client import JudgeRejected
from webapp.chat import services
from webapp.chat.feedback import feedback_set
from webapp.chat.models import Conversation, Message
from webapp.core.outbox import Task
from webapp.learning.models import Judgement
from webapp.learning.workflows.judging import finalize_conversation, judge_message
from webapp.learning.workflows.recovery import requeue_pending

pytestmark = [pytest.mark.django_db, pytest.mark.services]


class TooLongJudge:
    """A judge that refuses every prompt with a 4xx (the context is too long for it)."""

    model = "refusing"

    def complete(self, messages, n, choices=None):
        raise JudgeRejected("judge refused the request with 400: context too long")


class AgreeingJudge:
    model = "agreeing"

    def complete(self, messages, n, choices=None):
        return ["\\boxed{1}"] * n


@pytest.fixture
def user():
    return get_user_model().objects.create_user("alice")


@pytest.fixture
def queued(recorded_tasks, settings, django_capture_on_commit_callbacks):
    """Runs the sweep and returns the ids it queued for one task. Tasks the chat services
    queue are never sent (their commit never comes), as if the broker had been down."""
    settings.JUDGE_KIND = "llm"

    def sweep(task: Task) -> list[int]:
        recorded_tasks.clear()
        with django_capture_on_commit_callbacks(execute=True):
            requeue_pending()
        return [args[0] for name, *args in recorded_tasks if name == str(task)]

    return sweep


def _answer(user, question: str = "What is 2+2?") -> Message:
    return AnswerFactory(parent__conversation__owner=user, parent__content=question)


def _follow_up(answer: Message, text: str) -> Message:
    nxt = services.message_append(
        conversation=answer.conversation, role="user", content=text, parent=answer
    )
    services.message_link_next_state(turns=[answer], next_state=nxt)
    return nxt


def test_250_unjudgeable_answers_do_not_keep_a_real_one_from_the_sweep(user, queued) -> None:
    refused: list[Message] = []
    for i in range(250):
        answer = _answer(user, f"q{i}")
        if i % 2:  # no signal: a rating withdrawn to 0, no comment
            feedback_set(message=answer, author=user, rating=0)
        else:  # the judge answers 4xx: never retried, recorded
            _follow_up(answer, "x" * 50)
            refused.append(answer)
    for _ in range(2):  # two sweep intervals, each followed by what the judge worker runs
        for pk in queued(Task.JUDGE_MESSAGE):
            judge_message(pk, judge=TooLongJudge())

    real = _answer(user, "the real one")
    _follow_up(real, "thanks, and 3+3?")  # its judge task was lost (broker down)
    assert queued(Task.JUDGE_MESSAGE) == [real.pk]
    assert judge_message(real.pk, judge=AgreeingJudge()) is not None

    skipped = Message.objects.get(pk=refused[0].pk)
    assert "400" in skipped.judging_skip_reason
    assert Message.objects.filter(judging_skip_reason="no signal").count() == 125


def test_new_evidence_clears_the_reason_and_the_answer_is_swept_again(user, queued) -> None:
    answer = _answer(user)
    feedback_set(message=answer, author=user, rating=0)
    assert judge_message(answer.pk, judge=AgreeingJudge()) is None
    answer.refresh_from_db()
    assert answer.judging_skip_reason == "no signal"
    assert queued(Task.JUDGE_MESSAGE) == []

    feedback_set(message=answer, author=user, rating=-1)
    answer.refresh_from_db()
    assert answer.judging_skip_reason == ""
    assert answer.pk in queued(Task.JUDGE_MESSAGE)

    other = _answer(user, "again")
    feedback_set(message=other, author=user, rating=0)
    judge_message(other.pk, judge=AgreeingJudge())
    _follow_up(other, "and a next state")
    other.refresh_from_db()
    assert other.judging_skip_reason == ""


def test_ineligible_answers_are_recorded_with_their_reason(user, queued, settings) -> None:
    settings.SAMPLE_MAX_VERSION_LAG = 0
    answer = _answer(user)
    _follow_up(answer, "ok")
    answer.status = Message.Status.FAILED
    answer.save(update_fields=["status"])
    assert judge_message(answer.pk, judge=AgreeingJudge()) is None
    answer.refresh_from_db()
    assert answer.judging_skip_reason == "answer failed"
    assert queued(Task.JUDGE_MESSAGE) == []


def test_150_conversations_without_a_candidate_do_not_keep_a_real_one_from_the_sweep(
    user, queued
) -> None:
    now = timezone.now()
    empty = Conversation.objects.bulk_create(
        Conversation(owner=user, title=f"empty {i}", closed_at=now) for i in range(150)
    )
    for _ in range(2):
        for pk in queued(Task.FINALIZE_CONVERSATION):
            finalize_conversation(pk, judge=AgreeingJudge())
    assert {c.pk for c in empty} >= set(
        Conversation.objects.exclude(finalize_skip_reason="").values_list("pk", flat=True)
    )

    real = _answer(user, "the real one")
    Conversation.objects.filter(pk=real.conversation_id).update(closed_at=timezone.now())
    assert queued(Task.FINALIZE_CONVERSATION) == [real.conversation_id]
    assert finalize_conversation(real.conversation_id, judge=AgreeingJudge()) is not None
    assert Judgement.objects.filter(message=real, source="session_end").exists()
    assert queued(Task.FINALIZE_CONVERSATION) == []


def test_a_conversation_whose_candidate_the_judge_refuses_is_recorded(user, queued) -> None:
    answer = _answer(user)
    services.conversation_close(conversation=answer.conversation)
    assert finalize_conversation(answer.conversation_id, judge=TooLongJudge()) is None
    answer.conversation.refresh_from_db()
    assert "400" in answer.conversation.finalize_skip_reason
    assert queued(Task.FINALIZE_CONVERSATION) == []
