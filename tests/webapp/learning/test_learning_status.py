"""What the chat shows of an answer's learning: plain words, with the details behind them, right
straight after each kind of feedback, and never a judgement the user did not give without
saying where it was read."""

from __future__ import annotations

import pytest

from tests.factories import AnswerFactory, JudgementFactory, SampleFactory
from tests.webapp import cue_judge
from webapp.chat import services
from webapp.chat.feedback import feedback_rate, feedback_set, feedback_toggle_tag
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import PENDING, WITHDRAWN, learning_status, learning_statuses
from webapp.learning.workflows.judging import judge_message

judge = cue_judge.judge  # the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.services]

UNPARSED = [
    {"score": None, "text": "I think it is fine"},
    {"score": None, "text": ""},
    {"score": None, "text": "boxed{"},
]


def _answer(owner, *, consent: bool = True):
    return AnswerFactory(
        parent__conversation__owner=owner,
        parent__conversation__train_consent=consent,
        parent__content="What is the capital of France?",
        content="Lyon.",
    )


def _trained_into(sample: Sample, *, number: int, status: str) -> None:
    version = PolicyVersion.objects.create(number=number, status=status, adapter_path="/x")
    update = TrainingUpdate.objects.create(algorithm="rl", produced_version=version, status="done")
    Sample.objects.filter(pk=sample.pk).update(status="consumed", update=update)


def test_when_a_rated_answer_moves_through_the_loop_then_each_stage_is_said_in_plain_words() -> (
    None
):
    sample = SampleFactory(
        judgement__source="feedback", judgement__score=-1, judgement__hint="Be precise."
    )
    answer = sample.message_id
    assert learning_status(message_id=answer).text == "Will be learnt in the next update"
    Sample.objects.filter(pk=sample.pk).update(refusals=2)
    assert learning_status(message_id=answer).text == "Will be learnt in a later update"
    _trained_into(sample, number=3, status="retired")
    status = learning_status(message_id=answer)
    assert (status.text, status.detail) == (
        "Learnt in version 3",
        "judged -1 · hint taken · trained into v3",
    )
    PolicyVersion.objects.filter(number=3).update(status="rejected")
    assert learning_status(message_id=answer).text == (
        "Tried in version 3, which did not pass the checks"
    )
    Sample.objects.filter(pk=sample.pk).update(status="excluded", update=None)
    assert learning_status(message_id=answer).text == "Not used for learning"


def test_when_the_judge_read_the_users_next_message_then_the_status_says_so() -> None:
    sample = SampleFactory(judgement__source="prm", judgement__score=-1, judgement__hint="Paris.")
    status = learning_status(message_id=sample.message_id)
    assert status.text == (
        "Read from your next message: not what you wanted · will be learnt in the next update"
    )
    assert status.detail == "judged -1 from your next message · hint taken"
    assert not status.pending


def test_when_the_next_message_gave_nothing_to_learn_then_it_says_where_it_was_read() -> None:
    judged = JudgementFactory(score=0, hint="")
    unjudged = SampleFactory().message_id + 1000
    statuses = learning_statuses(message_ids=[judged.message_id, unjudged])
    assert (
        statuses[judged.message_id].text == "Read from your next message: nothing to learn from it"
    )
    assert unjudged not in statuses


def test_when_no_vote_of_the_judge_parsed_then_the_status_says_parley_could_not_tell() -> None:
    judged = JudgementFactory(score=0, hint="", votes=UNPARSED)
    status = learning_status(message_id=judged.message_id)
    assert status.text == "Read from your next message: Parley could not tell whether it was good"
    assert status.detail == "judged 0 from your next message · 0 of 3 votes read"


def test_when_some_votes_did_not_parse_then_the_details_count_those_read() -> None:
    votes = [UNPARSED[0], {"score": 1, "text": "\\boxed{1}"}, {"score": 1, "text": "\\boxed{1}"}]
    sample = SampleFactory(judgement__score=1, judgement__hint="", judgement__votes=votes)
    status = learning_status(message_id=sample.message_id)
    assert status.text == "Read from your next message: good · will be learnt in the next update"
    assert status.detail == "judged +1 from your next message · 2 of 3 votes read"


def test_when_the_hint_is_empty_then_no_hint_is_claimed() -> None:
    sample = SampleFactory(judgement__score=-1, judgement__hint="")
    assert "hint" not in learning_status(message_id=sample.message_id).detail


def test_when_a_comment_alone_was_judged_then_it_says_it_was_read_from_the_comment() -> None:
    sample = SampleFactory(
        judgement__score=0,
        judgement__hint="Answer in one sentence.",
        judgement__next_state_text="[user feedback] Answer in one sentence.",
    )
    assert learning_status(message_id=sample.message_id).text == (
        "Read from your comment: a hint of what you wanted · will be learnt in the next update"
    )


def test_when_a_thumb_is_given_then_it_reads_until_judged_and_then_says_what_comes(
    judge, alice
) -> None:
    answer = _answer(alice)
    feedback_rate(message=answer, author=alice, rating=1)
    status = learning_status(message_id=answer.pk)
    assert (status.text, status.pending) == (PENDING, True)
    judge_message(answer.pk, judge=judge)
    status = learning_status(message_id=answer.pk)
    assert (status.text, status.detail, status.pending) == (
        "Will be learnt in the next update",
        "judged +1",
        False,
    )


def test_when_a_thumbs_down_gets_a_tag_and_a_correction_then_each_change_reads_until_judged(
    judge, alice
) -> None:
    answer = _answer(alice)
    feedback_rate(message=answer, author=alice, rating=-1)
    judge_message(answer.pk, judge=judge)
    assert learning_status(message_id=answer.pk).text == "Will be learnt in the next update"
    feedback_toggle_tag(message=answer, author=alice, tag="not correct")
    # the judgement of the bare 👎 is no longer what the user said: never shown as if it were
    assert learning_status(message_id=answer.pk).text == PENDING
    judge_message(answer.pk, judge=judge)
    feedback_set(message=answer, author=alice, correction="Paris.")
    assert learning_status(message_id=answer.pk).pending
    judge_message(answer.pk, judge=judge)
    status = learning_status(message_id=answer.pk)
    assert (status.text, status.detail) == (
        "Will be learnt in the next update",
        "judged -1 · hint taken",
    )
    assert Sample.objects.get(message=answer, status="ready").correction == "Paris."


def test_when_feedback_returns_to_a_state_already_judged_then_it_is_not_left_reading(
    judge, alice
) -> None:
    answer = _answer(alice)
    feedback_rate(message=answer, author=alice, rating=-1)
    judge_message(answer.pk, judge=judge)
    feedback_toggle_tag(message=answer, author=alice, tag="not correct")
    judge_message(answer.pk, judge=judge)
    feedback_toggle_tag(message=answer, author=alice, tag="not correct")  # off again
    judge_message(answer.pk, judge=judge)  # finds that evidence judged: records nothing
    assert not learning_status(message_id=answer.pk).pending


def test_when_a_thumb_is_withdrawn_then_the_status_says_nothing_is_learnt_from_it(
    judge, alice
) -> None:
    answer = _answer(alice)
    feedback_rate(message=answer, author=alice, rating=1)
    judge_message(answer.pk, judge=judge)
    feedback_rate(message=answer, author=alice, rating=0)
    assert learning_status(message_id=answer.pk).text == WITHDRAWN  # before the judge runs
    judge_message(answer.pk, judge=judge)  # nothing left to judge: its sample is dropped
    status = learning_status(message_id=answer.pk)
    assert (status.text, status.pending) == (WITHDRAWN, False)
    assert not Sample.objects.filter(message=answer, status="ready").exists()


def test_when_an_unrated_answer_is_followed_by_a_complaint_then_it_is_read_from_that_message(
    judge, alice
) -> None:
    answer = _answer(alice)
    reply = services.message_append(
        conversation=answer.conversation,
        role="user",
        content="No, that's wrong. The capital of France is Paris.",
        parent=answer,
    )
    services.message_link_next_state(turns=[answer], next_state=reply)
    assert learning_status(message_id=answer.pk) is None  # nothing of the user's to read yet
    judge_message(answer.pk, judge=judge)
    status = learning_status(message_id=answer.pk)
    assert status.text.startswith("Read from your next message: not what you wanted")
    assert status.detail.startswith("judged -1 from your next message")


def test_when_the_answer_cannot_be_learnt_from_then_saved_feedback_says_so(judge, alice) -> None:
    answer = _answer(alice, consent=False)
    feedback_rate(message=answer, author=alice, rating=-1)
    judge_message(answer.pk, judge=judge)
    status = learning_status(message_id=answer.pk)
    assert (status.text, status.detail, status.pending) == (
        "Saved · not used for learning",
        "the conversation is not used for training",
        False,
    )
