"""Memory samples and memories proposed from feedback, on real PostgreSQL (the judge is the
default cue judge: no model)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.factories import AnswerFactory
from tests.webapp.cue_judge import CueJudge
from webapp.chat import services
from webapp.chat.feedback import feedback_set
from webapp.core.outbox import Task
from webapp.learning.distillation import (
    distilled_memories,
    memories_learnt_record,
    memory_sample_record,
)
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.workflows.judging import judge_message
from webapp.learning.workflows.training import sample_rows
from webapp.memory import services as memory_services
from webapp.memory.models import Memory

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture
def sent(monkeypatch) -> list[tuple]:
    calls: list[tuple] = []
    monkeypatch.setattr("webapp.core.outbox.send", lambda task, args: calls.append((task, *args)))
    return calls


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-for-tests")


def _answer(user, memories: list[Memory], question: str = "Plan my week.", **kw):
    return AnswerFactory(
        parent__conversation__owner=user,
        parent__content=question,
        content="Sure, Sam: Monday gym, Tuesday reading.",
        memories=[{"id": m.pk, "text": m.text} for m in memories],
        **kw,
    )


def test_an_answer_given_memories_queues_and_makes_one_memory_sample(
    alice, sent, django_capture_on_commit_callbacks
) -> None:
    memory = memory_services.memory_add(owner=alice, text="Call me Sam")
    with django_capture_on_commit_callbacks(execute=True):
        answer = _answer(alice, [memory])
    assert (Task.DISTIL_MEMORY, answer.pk) in sent
    sample = memory_sample_record(message_id=answer.pk)
    assert sample is not None and sample.kind == "memory" and sample.status == "ready"
    assert sample.judgement is None and sample.hint == "Call me Sam."
    assert sample.prompt_messages == [{"role": "user", "content": "Plan my week."}]
    assert sample.prompt_token_ids == answer.prompt_token_ids  # the served prompt: the teacher's
    assert memory_sample_record(message_id=answer.pk) == sample  # made once
    (row,) = sample_rows([sample.pk])
    assert (row.memory, row.hint, row.reward) == ("Call me Sam.", None, None)


def test_answers_without_memories_or_outside_training_make_none(
    alice, sent, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        plain = _answer(alice, [])
    assert (Task.DISTIL_MEMORY, plain.pk) not in sent
    assert memory_sample_record(message_id=plain.pk) is None
    memory = memory_services.memory_add(owner=alice, text="Call me Sam")
    private = _answer(alice, [memory])
    services.conversation_set_train_consent(conversation=private.conversation, consent=False)
    assert memory_sample_record(message_id=private.pk) is None
    assert not Sample.objects.exists()


def test_a_turn_holding_a_secret_leaves_an_excluded_memory_sample(alice, sent) -> None:
    memory = memory_services.memory_add(owner=alice, text="Call me Sam")
    answer = _answer(alice, [memory], question="my key is ghp_Xw81nLq0RzT4kVb92MdPcE7sYjH3aFgU5oNi")
    sample = memory_sample_record(message_id=answer.pk)
    assert sample is not None and sample.status == "excluded"
    assert sample.exclusion_reason.startswith("contains a secret")


def test_a_judgement_of_the_same_answer_keeps_its_memory_sample(alice, sent) -> None:
    memory = memory_services.memory_add(owner=alice, text="Call me Sam")
    answer = _answer(alice, [memory])
    memory_sample_record(message_id=answer.pk)
    feedback_set(message=answer, author=alice, rating=1)
    judge_message(answer.pk, judge=CueJudge())
    kinds = sorted(Sample.objects.filter(message=answer).values_list("kind", "status"))
    assert kinds == [("memory", "ready"), ("rl", "ready")] or kinds == [
        ("combined", "ready"),
        ("memory", "ready"),
    ]


def test_the_gate_measures_active_memories_and_a_published_version_marks_them_learnt(
    alice, sent
) -> None:
    sam = memory_services.memory_add(owner=alice, text="Call me Sam")
    km = memory_services.memory_add(owner=alice, text="Use km")
    samples = [memory_sample_record(message_id=_answer(alice, [sam, km]).pk) for _ in range(2)]
    memory_services.memory_pause(memory=km)
    assert distilled_memories(sample_ids=[s.pk for s in samples]) == [(sam.pk, "Call me Sam")]
    version = PolicyVersion.objects.create(owner=alice, number=1, status="live")
    TrainingUpdate.objects.create(
        algorithm="combined",
        owner=alice,
        produced_version=version,
        summary={
            "memory_gaps": [
                {
                    "memory": "Call me Sam",
                    "gap": 0.01,
                    "base_gap": 0.5,
                    "learnt": True,
                    "id": sam.pk,
                },
                {"memory": "Use km", "gap": 0.4, "base_gap": 0.5, "learnt": False, "id": km.pk},
            ]
        },
    )
    assert memories_learnt_record(version=version) == 1
    assert Memory.objects.get(pk=sam.pk).learnt_in == version
    assert Memory.objects.get(pk=km.pk).learnt_in is None


@pytest.mark.parametrize(
    ("feedback", "proposed"),
    [
        ({"rating": -1, "comment": "Please always answer in km, I'm in Germany."}, True),
        ({"rating": -1, "comment": "Make this one shorter."}, False),
        ({"rating": 1, "comment": "Thanks, perfect!"}, False),
        ({"rating": -1, "comment": "Call me Sam, my password is hunter2-Xk9!"}, False),
    ],
)
def test_a_comment_stating_a_standing_preference_proposes_a_memory(
    alice, sent, feedback, proposed
) -> None:
    answer = _answer(alice, [])
    feedback_set(message=answer, author=alice, **feedback)
    judge_message(answer.pk, judge=CueJudge())
    rows = list(Memory.objects.filter(owner=alice))
    assert bool(rows) is proposed
    if proposed:
        (memory,) = rows
        assert memory.state == "proposed" and memory.source == "comment"
        assert memory.source_message_id == answer.pk and "km" in memory.text
