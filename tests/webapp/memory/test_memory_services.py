"""Memories on real PostgreSQL: limits, history, proposals, ownership, and deletion leaving
serving at once (the browser's prompt and the /v1 admission's copy)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.http import Http404

from tests.factories import AnswerFactory
from webapp.learning.models import PolicyVersion
from webapp.memory import services
from webapp.memory.models import Memory, MemoryRevision
from webapp.memory.selectors import memories_served, memory_get_for_owner, memory_list

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-for-tests")


@pytest.fixture
def bob():
    return get_user_model().objects.create_user("bob", password="pw-for-tests")


def _texts(user) -> list[str]:
    return [memory.text for memory in memories_served(owner_id=user.pk)]


def test_a_typed_memory_is_served_at_once_and_keeps_its_history(alice) -> None:
    memory = services.memory_add(owner=alice, text="  Call me   Sam ")
    assert memory.text == "Call me Sam" and memory.state == "active" and memory.source == "typed"
    assert _texts(alice) == ["Call me Sam"]
    services.memory_edit(memory=memory, text="Call me Samantha")
    services.memory_pause(memory=memory)
    assert _texts(alice) == []
    services.memory_resume(memory=memory)
    assert _texts(alice) == ["Call me Samantha"]
    history = list(MemoryRevision.objects.filter(memory=memory).values_list("text", "state"))
    assert history == [
        ("Call me Sam", "active"),
        ("Call me Samantha", "active"),
        ("Call me Samantha", "paused"),
        ("Call me Samantha", "active"),
    ]


def test_deletion_leaves_serving_at_once_and_keeps_the_row(alice) -> None:
    keep = services.memory_add(owner=alice, text="I'm vegetarian")
    gone = services.memory_add(owner=alice, text="Use metric units")
    services.memory_delete(memory=gone)
    assert _texts(alice) == ["I'm vegetarian"]
    gone.refresh_from_db()
    assert gone.state == "deleted" and gone.text == "Use metric units"  # nothing wiped
    assert [m.pk for m in memory_list(owner=alice)] == [keep.pk]
    with pytest.raises(services.MemoryRefused, match="deleted"):
        services.memory_edit(memory=gone, text="Use imperial units")


def test_a_deletion_makes_the_v1_admission_forget_the_owners_copy(alice) -> None:
    from webapp.api import admission

    memory = services.memory_add(owner=alice, text="Call me Sam")
    admission._remembered[("secret", "parley")] = (0.0, _Key(alice.pk), None, ())
    admission._remembered[("other", "parley")] = (0.0, _Key(alice.pk + 1), None, ())
    from django.db import transaction

    with transaction.atomic():
        services.memory_delete(memory=memory)
    # on_commit runs at once outside a test transaction; in one, run the hook directly
    admission.forget_memories(alice.pk)
    assert ("secret", "parley") not in admission._remembered
    assert ("other", "parley") in admission._remembered
    admission._remembered.clear()


class _Key:
    def __init__(self, owner_id: int) -> None:
        self.owner_id = owner_id


def test_limits_refuse_with_the_sentence_shown(alice, settings) -> None:
    settings.MEMORY_MAX_CHARS = 20
    with pytest.raises(services.MemoryRefused, match="at most 20 characters"):
        services.memory_add(owner=alice, text="x" * 21)
    with pytest.raises(services.MemoryRefused, match="needs some text"):
        services.memory_add(owner=alice, text="   ")
    settings.MEMORY_MAX_KEPT = 2
    services.memory_add(owner=alice, text="Call me Sam")
    paused = services.memory_add(owner=alice, text="Use km")
    services.memory_pause(memory=paused)
    with pytest.raises(services.MemoryRefused, match="the most Parley keeps"):
        services.memory_add(owner=alice, text="I'm vegan")
    settings.MEMORY_MAX_KEPT = 50
    settings.MEMORY_MAX_CHARS = 300
    settings.MEMORY_SERVED_TOKENS = 8
    with pytest.raises(services.MemoryRefused, match="pause or shorten one"):
        services.memory_resume(memory=paused.__class__.objects.get(pk=paused.pk))
    assert Memory.objects.filter(owner=alice, state="active").count() == 1


def test_a_proposal_waits_for_keep_or_dismiss_and_is_never_proposed_twice(alice) -> None:
    answer = AnswerFactory(parent__conversation__owner=alice)
    proposal = services.memory_propose(
        owner=alice,
        text="Always answer in km",
        source="comment",
        source_message=answer,
        source_text="always answer in km please",
    )
    assert proposal is not None and proposal.state == "proposed"
    assert proposal.source_message_id == answer.pk
    assert _texts(alice) == []  # not served before the person keeps it
    assert (
        services.memory_propose(owner=alice, text="always answer in KM", source="comment") is None
    )
    services.memory_keep(memory=proposal, text="Answer in km")
    assert _texts(alice) == ["Answer in km"]
    other = services.memory_propose(owner=alice, text="I'm in Germany", source="follow-up")
    services.memory_dismiss(memory=other)
    assert services.memory_propose(owner=alice, text="I'm in Germany", source="comment") is None
    with pytest.raises(services.MemoryRefused, match="cannot be kept"):
        services.memory_keep(memory=Memory.objects.get(pk=other.pk))


def test_another_persons_memory_is_not_found(alice, bob) -> None:
    memory = services.memory_add(owner=alice, text="Call me Sam")
    assert memory_get_for_owner(owner=alice, pk=memory.pk) == memory
    for pk in (memory.pk, "nope", None):
        with pytest.raises(Http404):
            memory_get_for_owner(owner=bob, pk=pk)
    assert _texts(bob) == [] and memory_list(owner=bob) == []


def test_learnt_memories_leave_the_prompt_only_when_the_setting_says_so(alice, settings) -> None:
    memory = services.memory_add(owner=alice, text="Call me Sam")
    version = PolicyVersion.objects.get(number=0)
    assert services.memories_mark_learnt(memory_ids=[memory.pk], version=version) == 1
    assert services.memories_mark_learnt(memory_ids=[memory.pk], version=version) == 0
    assert _texts(alice) == ["Call me Sam"]
    settings.MEMORY_SERVE_LEARNT = False
    assert _texts(alice) == []
    services.memory_edit(memory=Memory.objects.get(pk=memory.pk), text="Call me Sammy")
    assert _texts(alice) == ["Call me Sammy"]  # an edit is learnt again
