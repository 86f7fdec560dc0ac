"""A bare 👎 becomes a group: hidden answers beside the disliked one, each a reward-0 sample in
its group, kept in one batch by the claim; on real PostgreSQL, the model stubbed at the one call
that samples the answers."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.factories import AnswerFactory
from webapp.chat.feedback import feedback_set
from webapp.chat.models import Message
from webapp.chat.selectors import transcript
from webapp.core.outbox import Task
from webapp.inference import ChoiceResult, CompletionAccumulator, ServingUnavailable
from webapp.learning import alternatives
from webapp.learning.models import Sample
from webapp.learning.workflows import claiming
from webapp.learning.workflows.judging import judge_message

pytestmark = [pytest.mark.django_db, pytest.mark.services]


class NoModel:
    """A judge that must not be asked: a 👍/👎 is judged without the model."""

    model = "none"

    def complete(self, messages, n, choices=None):
        raise AssertionError("the judge was asked")


@pytest.fixture
def queued(monkeypatch, settings) -> list[tuple]:
    settings.JUDGE_KIND = "llm"
    sent: list[tuple] = []
    monkeypatch.setattr("webapp.core.outbox.send", lambda task, args: sent.append((task, *args)))
    return sent


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice")


def _answer(user) -> Message:
    return AnswerFactory(
        parent__conversation__owner=user,
        parent__content="Suggest a dinner.",
        content="Steak with fries.",
        token_ids=[7, 8],
        token_logprobs=[-1.0, -2.0],
        prompt_token_ids=[1, 2, 3],
        usage=None,
        served_model="base",
        sampling_params={"max_tokens": 64, "temperature": 0.7},
    )


def _dislike(user, *, comment: str = "") -> Sample:
    answer = _answer(user)
    feedback_set(message=answer, author=user, rating=-1, comment=comment)
    judge_message(answer.pk, judge=NoModel())
    return Sample.objects.get(message=answer, status="ready")


def _sampled(texts: list[str]) -> CompletionAccumulator:
    accumulator = CompletionAccumulator(prompt_token_ids=[1, 2, 3])
    for index, text in enumerate(texts):
        tokens = [20 + index, 30 + index] if text else []
        accumulator.choices[index] = ChoiceResult(
            index=index,
            content=text,
            token_ids=tokens,
            token_logprobs=[-0.5] * len(tokens),
            finish_reason="stop",
        )
    return accumulator


@pytest.fixture
def model(monkeypatch) -> list[tuple]:
    asked: list[tuple] = []

    async def sample(sample: Sample, n: int) -> CompletionAccumulator:
        asked.append((sample.prompt_messages, n))
        return _sampled(["Mushroom risotto.", "Lentil curry.", ""])  # one came back empty

    monkeypatch.setattr(alternatives, "_sample", sample)
    return asked


def test_a_bare_thumbs_down_queues_answers_to_compare_it_with(
    queued, alice, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        disliked = _dislike(alice)
    assert (Task.SAMPLE_ALTERNATIVES, disliked.pk) in queued
    with django_capture_on_commit_callbacks(execute=True):
        with_words = _dislike(alice, comment="No meat, please.")
    assert (Task.SAMPLE_ALTERNATIVES, with_words.pk) not in queued


def test_they_are_hidden_siblings_each_a_reward_0_sample_in_the_disliked_answers_group(
    queued, alice, model
) -> None:
    disliked = _dislike(alice)
    recorded = alternatives.alternatives_sample(sample_id=disliked.pk)
    assert [m.content for m in recorded] == ["Mushroom risotto.", "Lentil curry."]
    assert model == [([{"role": "user", "content": "Suggest a dinner."}], 3)]
    for answer in recorded:
        assert (answer.parent_id, answer.turn_type, answer.selected) == (
            disliked.message.parent_id,
            "unseen",
            False,
        )
        sample = Sample.objects.get(message=answer)
        assert (sample.reward, sample.kind, sample.group_key) == (0.0, "rl", disliked.group_key)
        assert sample.response_token_ids == answer.token_ids and sample.prompt_token_ids
    # The transcript never shows them: the disliked answer is still the only one.
    conversation = disliked.message.conversation
    (_, answer_entry) = transcript(conversation=conversation)
    assert answer_entry.message == disliked.message and answer_entry.sibling_count == 1
    # A redelivered task records nothing twice.
    assert alternatives.alternatives_sample(sample_id=disliked.pk) == []
    assert Message.objects.filter(turn_type="unseen").count() == 2


def test_the_claim_takes_the_group_whole_into_one_batch(queued, alice, model, settings) -> None:
    settings.TRAIN_BATCH_SIZE = 3
    first = _dislike(alice)
    alternatives.alternatives_sample(sample_id=first.pk)
    second = _dislike(alice)
    ready = claiming.candidates(claiming.claimable_samples(algorithm="combined"))
    group = {c.key for c in ready if c.group == first.group_key}
    assert len(group) == 3 and first.pk in group
    chosen = claiming.claim(ready, rules=claiming.claim_rules())
    # The first group (3) fills the batch; the second 👎 waits rather than split it.
    assert set(chosen.batch) == group and second.pk not in chosen.batch


def test_no_model_no_alternatives_and_the_thumbs_down_still_trains(
    queued, alice, monkeypatch
) -> None:
    async def down(sample, n):
        raise ServingUnavailable("vLLM is restarting")

    monkeypatch.setattr(alternatives, "_sample", down)
    disliked = _dislike(alice)
    assert alternatives.alternatives_sample(sample_id=disliked.pk) == []
    disliked.refresh_from_db()
    assert disliked.status == "ready" and not Message.objects.filter(turn_type="unseen").exists()


def test_turned_off_by_its_setting(
    queued, alice, settings, django_capture_on_commit_callbacks
) -> None:
    settings.DISLIKE_ALTERNATIVES = 0
    with django_capture_on_commit_callbacks(execute=True):
        disliked = _dislike(alice)
    assert (Task.SAMPLE_ALTERNATIVES, disliked.pk) not in queued
    assert alternatives.alternatives_sample(sample_id=disliked.pk) == []


def test_a_withdrawn_thumb_is_not_trained_nor_what_was_sampled_beside_it(
    queued, alice, model
) -> None:
    disliked = _dislike(alice)
    unseen = alternatives.alternatives_sample(sample_id=disliked.pk)
    feedback_set(message=disliked.message, author=alice, rating=0)
    judge_message(disliked.message_id, judge=NoModel())
    withdrawn = Sample.objects.filter(message__in=[disliked.message, *unseen])
    assert {(s.status, s.exclusion_reason) for s in withdrawn} == {
        ("superseded", "the feedback was withdrawn")
    }
    assert withdrawn.count() == 3


def test_they_are_asked_of_the_replica_that_serves_the_owners_lineage(
    queued, alice, monkeypatch, settings
) -> None:
    settings.LEARNING_SCOPE = "user"
    asked: list[str | None] = []

    async def stream(messages, *, model, params=None, base_url=None, adapter_path="", lineage=None):
        asked.append(lineage)
        yield {"choices": [{"index": 0, "delta": {"content": "Soup."}, "token_ids": [9]}]}

    monkeypatch.setattr(alternatives, "stream_chat", stream)
    disliked = _dislike(alice)
    alternatives.alternatives_sample(sample_id=disliked.pk)
    assert asked == [f"user-{alice.pk}"]
