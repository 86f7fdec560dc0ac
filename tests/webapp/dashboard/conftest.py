"""Data along the whole learning chain (conversation → answer → feedback → judgement → sample
→ update → version), built directly as rows: these tests read what the loop wrote."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.factories import JudgementFactory, SampleFactory
from webapp.api.keys import api_key_create
from webapp.api.models import ApiKey
from webapp.chat.models import Conversation, Feedback, Message
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live


@pytest.fixture(autouse=True)
def no_broker(recorded_tasks):
    """Queued tasks are recorded instead of sent (the re-judge tests read them)."""
    return recorded_tasks


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_superuser("root", password="root-pass-4242")


@dataclass
class Chain:
    conversation: Conversation
    question: Message
    answer: Message
    feedback: Feedback
    judgement: Judgement
    sample: Sample
    update: TrainingUpdate
    version: PolicyVersion
    key: ApiKey


def turn(owner, *, title: str = "Arithmetic", question: str = "What is 2+2?") -> Message:
    """A conversation with one question and an eligible answer from the live version."""
    conversation = Conversation.objects.create(
        owner=owner, title=title, source="api", external_session_id=f"session-{title}"
    )
    asked = Message.objects.create(conversation=conversation, role="user", content=question)
    return Message.objects.create(
        conversation=conversation,
        parent=asked,
        role="assistant",
        content=f"Answer to {question}",
        turn_index=1,
        policy_version=policy_version_live(),
        prompt_token_ids=[1, 2, 3],
        token_ids=[4, 5],
        token_logprobs=[-0.1, -0.2],
        sampling_params={"temperature": 0.7},
    )


def judged(answer: Message, *, score: int = 1, fingerprint: str = "f") -> Judgement:
    return JudgementFactory(message=answer, score=score, fingerprint=fingerprint)


def sampled(judgement: Judgement, *, status: str = "ready", update=None) -> Sample:
    return SampleFactory(judgement=judgement, status=status, update=update)


def trained_update(number: int = 1, *, metrics: list[dict] | None = None) -> TrainingUpdate:
    """A finished update that produced version ``number`` (a candidate)."""
    version = PolicyVersion.objects.create(
        number=number,
        adapter_path=f"/adapters/v{number}",
        parent=policy_version_live(),
        status="candidate",
        probe_metrics={"probe_kl": 0.01 * number, "probe_ppl": 10.0 + number, "passed": True},
    )
    return TrainingUpdate.objects.create(
        algorithm="combined",
        config={"clip_low": 0.2, "clip_high": 0.28, "lr": 1e-5},
        status="done",
        base_version=policy_version_live(),
        produced_version=version,
        metrics=metrics
        if metrics is not None
        else [
            {"step": 0, "loss": 0.5, "kl": None, "clip_fraction": 0.1, "grad_norm": 1.5},
            {"step": 1, "loss": 0.3, "kl": None, "clip_fraction": 0.3, "grad_norm": 1.1},
            {"done": True, "steps": 2},
        ],
        summary={"sample_ids": []},
        started_at=timezone.now() - timedelta(minutes=1),
        finished_at=timezone.now(),
    )


@pytest.fixture
def chain(alice) -> Chain:
    """One of everything, linked: a consumed sample whose update produced v1."""
    answer = turn(alice)
    feedback = Feedback.objects.create(
        message=answer, author=alice, rating=1, comment="Nice and short", tags=["correct"]
    )
    judgement = judged(answer)
    update = trained_update(1)
    sample = sampled(judgement, status="consumed", update=update)
    key, _ = api_key_create(owner=alice, name="laptop")
    answer.conversation.api_key = key
    answer.conversation.save(update_fields=["api_key"])
    return Chain(
        conversation=answer.conversation,
        question=answer.parent,
        answer=answer,
        feedback=feedback,
        judgement=judgement,
        sample=sample,
        update=update,
        version=update.produced_version,
        key=key,
    )
