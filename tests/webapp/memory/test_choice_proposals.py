"""A chosen alternative proposes a memory when a person chose the same form twice (a list over
prose, a much shorter or much longer answer): one choice is about one answer, two are a standing
preference. Real PostgreSQL and the real views; the model stubbed at the one call that samples
the alternatives (as in tests/webapp/learning/test_comparisons.py)."""

from __future__ import annotations

import doctest

import pytest
from django.urls import reverse

import webapp.memory.choice_cues
from tests.webapp.learning.test_alternatives import _sampled
from tests.webapp.learning.test_comparisons import _disliked, alice, model, queued
from webapp.learning import alternatives
from webapp.learning.comparisons import alternatives_of, comparison_choose
from webapp.memory.models import Memory

pytestmark = [pytest.mark.django_db, pytest.mark.services]
__all__ = ["alice", "model", "queued"]  # fixtures shared with test_comparisons

A_LIST = "- Mushroom risotto\n- Lentil curry\n- Bean chili"


@pytest.fixture
def listing(monkeypatch, queued) -> None:
    """Alternatives as a list beside the disliked prose answer ("Steak with fries.")."""

    async def sample(sample, n: int):
        return _sampled([A_LIST, "Lentil curry.", "Beef stew."])

    monkeypatch.setattr(alternatives, "_sample", sample)


def test_the_rules_doctests_hold() -> None:
    assert doctest.testmod(webapp.memory.choice_cues).failed == 0


def test_the_same_form_chosen_twice_proposes_a_memory_under_the_second_answer(
    alice, listing
) -> None:
    first = _disliked(alice)
    comparison_choose(disliked=first, chosen=alternatives_of(first)[0])
    assert not Memory.objects.exists()  # one choice is about one answer
    second = _disliked(alice)
    comparison_choose(disliked=second, chosen=alternatives_of(second)[0])
    memory = Memory.objects.get()
    assert (memory.state, memory.source) == ("proposed", "alternative")
    assert memory.text == "Use bullet points when an answer lists several things."
    assert memory.source_message_id == second.pk
    assert memory.source_text == "You chose the listed answer in 2 comparisons."
    third = _disliked(alice)  # a proposal already made is not made again
    comparison_choose(disliked=third, chosen=alternatives_of(third)[0])
    assert Memory.objects.count() == 1


def test_choices_with_no_common_form_or_none_better_propose_nothing(alice, listing) -> None:
    for _ in range(2):
        disliked = _disliked(alice)
        comparison_choose(disliked=disliked, chosen=alternatives_of(disliked)[1])  # prose
    disliked = _disliked(alice)
    comparison_choose(disliked=disliked, chosen=None)
    assert not Memory.objects.exists()


def test_another_persons_choices_do_not_count_toward_yours(alice, listing, django_user_model):
    bob = django_user_model.objects.create_user("bob")
    theirs = _disliked(bob)
    comparison_choose(disliked=theirs, chosen=alternatives_of(theirs)[0])
    mine = _disliked(alice)
    comparison_choose(disliked=mine, chosen=alternatives_of(mine)[0])
    assert not Memory.objects.exists()


def test_the_choice_page_shows_the_proposal_under_the_answer_at_once(
    client, alice, listing
) -> None:
    first = _disliked(alice)
    comparison_choose(disliked=first, chosen=alternatives_of(first)[0])
    second = _disliked(alice)
    client.force_login(alice)
    response = client.post(
        reverse("chat:compare", args=[second.pk]),
        {"chosen": str(alternatives_of(second)[0].pk)},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="memory-proposals-{second.pk}" hx-swap-oob="true"' in html
    assert "Use bullet points when an answer lists several things." in html
