"""What the chat shows of an answer's learning: plain words, with the details behind them."""

from __future__ import annotations

import pytest

from tests.factories import JudgementFactory, SampleFactory
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import learning_status, learning_statuses

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def _trained_into(sample: Sample, *, number: int, status: str) -> None:
    version = PolicyVersion.objects.create(number=number, status=status, adapter_path="/x")
    update = TrainingUpdate.objects.create(algorithm="rl", produced_version=version, status="done")
    Sample.objects.filter(pk=sample.pk).update(status="consumed", update=update)


def test_each_stage_of_an_answers_learning_in_plain_words() -> None:
    sample = SampleFactory(judgement__score=-1, judgement__hint="Be precise.")
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


def test_a_judged_answer_without_a_sample_and_an_unjudged_one() -> None:
    judged = JudgementFactory(score=0)
    unjudged = SampleFactory().message_id + 1000
    statuses = learning_statuses(message_ids=[judged.message_id, unjudged])
    assert statuses[judged.message_id].text == "Read: nothing to learn from it"
    assert unjudged not in statuses
