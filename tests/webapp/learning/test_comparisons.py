"""Is one of them better? After a bare 👎 the person compares the answers sampled beside the
disliked one; the chosen one is a +1 sample in the disliked answer's group (a preference pair
the update's group advantage trains). Real PostgreSQL, the real views; the model stubbed at the
one call that samples the answers (as in test_alternatives)."""

from __future__ import annotations

import pytest
import torch
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.webapp.learning.test_alternatives import NoModel, _answer, _sampled, queued
from trainer.advantages import reward_advantages
from trainer.batch import Sample as TrainerSample
from trainer.config import UpdateConfig
from webapp.chat.feedback import feedback_set
from webapp.learning import alternatives
from webapp.learning.comparisons import (
    ComparisonInvalid,
    alternatives_of,
    comparison_choose,
    comparison_view,
)
from webapp.learning.models import Comparison, Judgement, Sample
from webapp.learning.workflows.judging import judge_message

pytestmark = [pytest.mark.django_db, pytest.mark.services]
__all__ = ["queued"]  # the fixture, shared with test_alternatives


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-alice-1")


@pytest.fixture
def model(monkeypatch, queued) -> None:
    async def sample(sample: Sample, n: int):
        return _sampled(["Mushroom risotto.", "Lentil curry.", "Beef stew."])

    monkeypatch.setattr(alternatives, "_sample", sample)


def _disliked(user, *, sampled: bool = True):
    answer = _answer(user)
    feedback_set(message=answer, author=user, rating=-1)
    judge_message(answer.pk, judge=NoModel())
    sample = Sample.objects.get(message=answer, status="ready")
    if sampled:
        alternatives.alternatives_sample(sample_id=sample.pk)
    return answer


def test_the_chosen_answer_becomes_a_plus_one_sample_in_the_disliked_answers_group(
    alice, model
) -> None:
    disliked = _disliked(alice)
    offered = alternatives_of(disliked)
    assert [m.content for m in offered] == ["Mushroom risotto.", "Lentil curry.", "Beef stew."]
    comparison_choose(disliked=disliked, chosen=offered[1])
    chosen = Sample.objects.get(message=offered[1], status="ready")
    assert (chosen.reward, chosen.kind) == (1.0, "rl")
    assert chosen.judgement.source == Judgement.Source.CHOSEN and chosen.judgement.score == 1
    assert chosen.response_token_ids == offered[1].token_ids
    superseded = Sample.objects.get(message=offered[1], status="superseded")
    assert superseded.reward == 0.0 and "chosen" in superseded.exclusion_reason
    group = Sample.objects.filter(group_key=chosen.group_key, status="ready")
    rewards = sorted(s.reward for s in group)
    assert rewards == [-1.0, 0.0, 0.0, 1.0]
    view = comparison_view(disliked=disliked)
    assert (view.state, view.chosen_number) == ("done", 2)


def test_the_pair_moves_the_model_from_the_disliked_answer_to_the_chosen_one(alice, model) -> None:
    disliked = _disliked(alice)
    offered = alternatives_of(disliked)
    comparison_choose(disliked=disliked, chosen=offered[0])
    group = Sample.objects.filter(message__parent=disliked.parent, status="ready")
    rows = [
        TrainerSample(
            prompt_token_ids=s.prompt_token_ids,
            response_token_ids=s.response_token_ids,
            sampler_logprobs=s.response_logprobs,
            reward=s.reward,
            group_id=s.group_key,
        )
        for s in group
    ]
    advantages, _ = reward_advantages(UpdateConfig(), rows)
    by_reward = dict(zip([r.reward for r in rows], advantages, strict=False))
    assert by_reward[1.0] > 1.0 and by_reward[-1.0] < -1.0
    assert by_reward[0.0] == 0.0
    assert torch.isclose(torch.tensor(sum(advantages)), torch.tensor(0.0), atol=1e-5)


def test_none_better_is_kept_and_changes_no_reward(alice, model) -> None:
    disliked = _disliked(alice)
    before = sorted(Sample.objects.filter(status="ready").values_list("reward", flat=True))
    comparison_choose(disliked=disliked, chosen=None)
    assert Comparison.objects.get(disliked=disliked).chosen is None
    after = sorted(Sample.objects.filter(status="ready").values_list("reward", flat=True))
    assert before == after == [-1.0, 0.0, 0.0, 0.0]
    assert comparison_view(disliked=disliked).state == "done"


def test_one_choice_per_answer_and_only_among_those_offered(alice, model) -> None:
    disliked = _disliked(alice)
    other = _disliked(alice)
    with pytest.raises(ComparisonInvalid, match="not one of those offered"):
        comparison_choose(disliked=disliked, chosen=alternatives_of(other)[0])
    comparison_choose(disliked=disliked, chosen=alternatives_of(disliked)[0])
    with pytest.raises(ComparisonInvalid, match="already compared"):
        comparison_choose(disliked=disliked, chosen=alternatives_of(disliked)[1])
    assert Sample.objects.filter(reward=1.0).count() == 1


def test_nothing_to_choose_before_the_answers_are_written(alice, model, settings) -> None:
    disliked = _disliked(alice, sampled=False)
    assert comparison_view(disliked=disliked).state == "queued"
    with pytest.raises(ComparisonInvalid, match="no other answers to compare with this one yet"):
        comparison_choose(disliked=disliked, chosen=None)
    settings.DISLIKE_ALTERNATIVES = 0
    assert comparison_view(disliked=disliked).state == "none"


def test_only_a_bare_thumbs_down_still_waiting_for_its_update_is_offered(alice, model) -> None:
    disliked = _disliked(alice)
    feedback_set(message=disliked, author=alice, comment="Too meaty.")
    assert comparison_view(disliked=disliked).state == "none"  # words say more than a pair
    with pytest.raises(ComparisonInvalid):
        comparison_choose(disliked=disliked, chosen=alternatives_of(disliked)[0])
    question = disliked.parent  # the user's own message is no answer to compare
    assert comparison_view(disliked=question).state == "none"
    trained = _disliked(alice)
    Sample.objects.filter(message__parent=trained.parent).update(status="consumed")
    assert comparison_view(disliked=trained).state == "none"  # its group is trained: too late
    with pytest.raises(ComparisonInvalid):
        comparison_choose(disliked=trained, chosen=alternatives_of(trained)[0])
    assert not Comparison.objects.exists() and not Sample.objects.filter(reward=1.0).exists()


def test_a_thumbs_down_withdrawn_after_the_choice_takes_the_chosen_sample_with_it(
    alice, model
) -> None:
    disliked = _disliked(alice)
    comparison_choose(disliked=disliked, chosen=alternatives_of(disliked)[1])
    feedback_set(message=disliked, author=alice, rating=0)
    judge_message(disliked.pk, judge=NoModel())
    assert not Sample.objects.filter(status="ready").exists()
    chosen = Sample.objects.get(reward=1.0)
    assert chosen.status == "superseded" and chosen.exclusion_reason == "the feedback was withdrawn"


def test_the_panel_offers_them_and_takes_the_choice(alice, model, client) -> None:
    disliked = _disliked(alice)
    client.force_login(alice)
    url = reverse("chat:compare", args=[disliked.pk])
    page = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "Is one of them better?" in page and "Lentil curry." in page
    offered = alternatives_of(disliked)
    done = client.post(url, {"chosen": offered[2].pk}, headers={"HX-Request": "true"})
    assert done.status_code == 200
    assert "You chose answer 3 of 3 over this one." in done.content.decode()
    again = client.post(url, {"chosen": offered[0].pk}, headers={"HX-Request": "true"})
    assert "You already compared these answers." in again.content.decode()
    bad = client.post(url, {"chosen": "12x"}, headers={"HX-Request": "true"})
    assert "That answer was not one of those offered." in bad.content.decode()
    assert Sample.objects.filter(reward=1.0).count() == 1


def test_the_panel_keeps_waiting_while_the_answers_are_on_their_way(alice, model, client) -> None:
    disliked = _disliked(alice, sampled=False)
    client.force_login(alice)
    url = reverse("chat:compare", args=[disliked.pk])
    waiting = client.get(url).content.decode()
    assert "Other answers to compare with this one are on their way" in waiting
    assert 'hx-trigger="load delay:3s"' in waiting and "poll=" not in waiting
    # No clock gives up on them: an old page's poll counter changes nothing.
    later = client.get(url + "?poll=45").content.decode()
    assert "could not be written" not in later and "hx-get" in later


def test_someone_elses_answer_is_not_found(alice, model, client) -> None:
    disliked = _disliked(alice)
    bob = get_user_model().objects.create_user("bob", password="pw-bob-1")
    client.force_login(bob)
    url = reverse("chat:compare", args=[disliked.pk])
    assert client.get(url).status_code == 404
    assert client.post(url, {"chosen": "none"}).status_code == 404
    assert not Comparison.objects.exists()


def test_my_data_exports_the_comparisons_and_only_mine(alice, model) -> None:
    from webapp.learning.export import export_all

    disliked = _disliked(alice)
    comparison_choose(disliked=disliked, chosen=alternatives_of(disliked)[0])
    bob = get_user_model().objects.create_user("bob")
    other = _disliked(bob)
    comparison_choose(disliked=other, chosen=None)
    mine = [r for r in export_all(owner=alice) if r["type"] == "comparison"]
    assert [(r["disliked_message_id"], r["chosen_message_id"]) for r in mine] == [
        (disliked.pk, alternatives_of(disliked)[0].pk)
    ]
    everyone = [r for r in export_all() if r["type"] == "comparison"]
    assert {r["chosen_message_id"] for r in everyone} == {alternatives_of(disliked)[0].pk, None}


def test_the_pair_is_trained_at_the_temperature_both_answers_were_sampled_at(alice, model) -> None:
    from webapp.learning.workflows.training import sample_rows

    disliked = _disliked(alice)
    offered = alternatives_of(disliked)
    comparison_choose(disliked=disliked, chosen=offered[0])
    assert offered[0].sampling_params == {
        "max_tokens": 64,
        "temperature": 0.7,  # the 👎'd request's
        "n": 3,
        "beside": disliked.pk,
    }
    ready = Sample.objects.filter(status="ready").order_by("pk").values_list("pk", flat=True)
    rows = sample_rows(list(ready))
    assert sorted(row.reward for row in rows) == [-1.0, 0.0, 0.0, 1.0]
    assert {row.temperature for row in rows} == {0.7}  # the 👎'd request's, not vLLM's 1


def test_a_greedy_or_unset_request_gets_alternatives_at_the_chats_temperature(
    alice, model, settings
) -> None:
    from webapp.learning.workflows.training import sample_rows

    answer = _answer(alice)
    answer.sampling_params = {"temperature": 0}  # greedy: n answers would be one
    answer.save(update_fields=["sampling_params"])
    feedback_set(message=answer, author=alice, rating=-1)
    judge_message(answer.pk, judge=NoModel())
    alternatives.alternatives_sample(sample_id=Sample.objects.get(message=answer).pk)
    offered = alternatives_of(answer)
    assert {m.sampling_params["temperature"] for m in offered} == {settings.CHAT_TEMPERATURE}
    rows = sample_rows([s.pk for s in Sample.objects.filter(message__in=offered)])
    assert {row.temperature for row in rows} == {settings.CHAT_TEMPERATURE}
