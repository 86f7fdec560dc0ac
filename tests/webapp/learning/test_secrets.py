"""A turn that holds a secret is judged and kept but never trained: on real PostgreSQL, with
the judge stubbed where it would call a model."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.factories import AnswerFactory
from webapp.chat import services
from webapp.chat.feedback import feedback_set
from webapp.chat.models import Message
from webapp.core.outbox import Task
from webapp.inference import ChoiceResult
from webapp.learning import alternatives
from webapp.learning.comparisons import ComparisonInvalid, comparison_choose, comparison_view
from webapp.learning.models import AlternativesJob, Sample
from webapp.learning.selectors import learning_status
from webapp.learning.workflows import claiming
from webapp.learning.workflows.judging import judge_message

pytestmark = [pytest.mark.django_db, pytest.mark.services]

AWS_PAIR = (
    "AWS_ACCESS_KEY_ID=AKIAQ4NRXG7VJ2MHT5LD\n"
    "AWS_SECRET_ACCESS_KEY=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"
)

GITHUB_TOKEN = "ghp_Xw81nLq0RzT4kVb92MdPcE7sYjH3aFgU5oNi"


class Judge:
    """The judge's model: every vote −1, every hint the same sentence."""

    model = "scripted"

    def complete(self, messages, n, choices=None):
        if "[HINT_START]" in messages[-1]["content"]:
            return ["\\boxed{1} [HINT_START]Answer with the region only.[HINT_END]"] * n
        return ["\\boxed{-1}"] * n


@pytest.fixture
def sent(monkeypatch, settings) -> list[tuple]:
    settings.JUDGE_KIND = "llm"
    calls: list[tuple] = []
    monkeypatch.setattr("webapp.core.outbox.send", lambda task, args: calls.append((task, *args)))
    return calls


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-for-tests")


def _turn(user, question: str, answer: str = "eu-west-1") -> Message:
    return AnswerFactory(
        parent__conversation__owner=user,
        parent__content=question,
        content=answer,
        token_ids=[7, 8],
        token_logprobs=[-1.0, -2.0],
        prompt_token_ids=[1, 2, 3],
        usage=None,
        served_model="base",
        sampling_params={"max_tokens": 64, "temperature": 0.7},
    )


def _sample(answer: Message) -> Sample:
    return Sample.objects.get(message=answer)


def test_a_key_in_the_persons_message_keeps_the_sample_out_of_training(alice, sent) -> None:
    answer = _turn(alice, f"Why does boto3 reject these?\n{AWS_PAIR}")
    feedback_set(message=answer, author=alice, rating=-1)
    judge_message(answer.pk, judge=Judge())
    sample = _sample(answer)
    assert sample.status == "excluded"
    assert sample.exclusion_reason.startswith("contains a secret: AWS Access Key in a message")
    assert "AKIAQ4NRXG7VJ2MHT5LD" not in sample.exclusion_reason  # the reason names, never quotes
    assert sample.prompt_messages[0]["content"].endswith(AWS_PAIR[-20:])  # kept, not wiped
    assert not AlternativesJob.objects.exists()  # nothing sampled beside a bare 👎 of it
    assert Task.MAYBE_TRAIN not in [call[0] for call in sent]
    for scope in (None, alice.pk):  # neither a shared lineage's batch nor the person's own
        assert not claiming.claimable_samples(algorithm="combined", owner_id=scope).exists()


def test_a_tool_result_with_a_key_keeps_the_sample_out_of_training(alice, sent) -> None:
    question = _turn(alice, "Which region does my .env use?", answer="")
    conversation = question.conversation
    Message.objects.filter(pk=question.pk).update(
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": ".env"}'},
            }
        ]
    )
    result = services.message_append(
        conversation=conversation,
        role="tool",
        content=f"AWS_REGION=eu-west-1\n{AWS_PAIR}",
        parent=question,
        tool_call_id="call_1",
    )
    answer = AnswerFactory(
        parent=result,
        content="Your .env uses eu-west-1.",
        token_ids=[9],
        token_logprobs=[-0.3],
        prompt_token_ids=[1],
        usage=None,
        served_model="base",
    )
    feedback_set(message=answer, author=alice, rating=1)
    judge_message(answer.pk, judge=Judge())
    sample = _sample(answer)
    assert sample.status == "excluded"
    assert "AWS Access Key in a tool result" in sample.exclusion_reason
    status = learning_status(message_id=answer.pk)  # under the answer, in the chat
    assert "Not learnt from: it holds what looks like a secret" in status.text
    assert "excluded from training: contains a secret: AWS Access Key" in status.detail


@pytest.mark.parametrize(
    ("feedback", "where"),
    [
        ({"rating": -1, "comment": f"use my token {GITHUB_TOKEN}"}, "comment"),
        ({"correction": "Connect with postgres://app:Qz7!mVp2Lx@db:5432/prod"}, "correction"),
    ],
)
def test_a_secret_in_the_feedback_keeps_the_sample_out_of_training(
    alice, sent, feedback, where
) -> None:
    answer = _turn(alice, "How do I connect to the database?")
    feedback_set(message=answer, author=alice, **feedback)
    judge_message(answer.pk, judge=Judge())
    sample = _sample(answer)
    assert sample.status == "excluded" and f"in the {where}" in sample.exclusion_reason


def test_a_secret_in_the_next_message_keeps_the_sample_out_of_training(alice, sent) -> None:
    answer = _turn(alice, "How do I log in to the router?", answer="Use the admin page.")
    follow_up = services.message_append(
        conversation=answer.conversation,
        role="user",
        content="That failed. Mein Passwort ist Sommer2024! und es geht nicht.",
        parent=answer,
    )
    services.message_link_next_state(turns=[answer], next_state=follow_up)
    judge_message(answer.pk, judge=Judge())
    sample = _sample(answer)
    assert sample.status == "excluded"
    assert "Password or key named in words in the next message" in sample.exclusion_reason


def test_a_turn_without_a_secret_still_trains(alice, sent) -> None:
    answer = _turn(alice, "My password expired, how do I reset it?")
    feedback_set(message=answer, author=alice, rating=1)
    judge_message(answer.pk, judge=Judge())
    assert _sample(answer).status == "ready" and _sample(answer).exclusion_reason == ""


def test_an_alternative_that_writes_a_secret_is_kept_but_never_offered(alice, sent) -> None:
    settings_answer = _turn(alice, "Suggest a strong password.", answer="password123")
    feedback_set(message=settings_answer, author=alice, rating=-1)
    judge_message(settings_answer.pk, judge=Judge())
    disliked = _sample(settings_answer)
    written = alternatives.alternatives_record(
        sample=disliked,
        results=[
            ChoiceResult(
                index=0,
                content="Use a passphrase of four random words.",
                token_ids=[20],
                token_logprobs=[-0.5],
                finish_reason="stop",
            ),
            ChoiceResult(
                index=1,
                content="Try this one: password: Tr0ub4dor&3x",
                token_ids=[21],
                token_logprobs=[-0.5],
                finish_reason="stop",
            ),
        ],
        prompt_token_ids=[1, 2, 3],
    )
    statuses = [(_sample(m).status, _sample(m).exclusion_reason[:17]) for m in written]
    assert statuses == [("ready", ""), ("excluded", "contains a secret")]
    assert comparison_view(disliked=settings_answer).alternatives == [written[0]]
    with pytest.raises(ComparisonInvalid, match="not one of those offered"):
        comparison_choose(disliked=settings_answer, chosen=written[1])


def test_my_model_and_the_admin_show_why(alice, sent, client, admin_client) -> None:
    answer = _turn(alice, f"Keep these for me:\n{AWS_PAIR}")
    feedback_set(message=answer, author=alice, rating=1)
    judge_message(answer.pk, judge=Judge())
    client.force_login(alice)
    page = client.get(reverse("mymodel:index")).content.decode()
    assert "holds what looks like a secret (AWS Access Key in a message of the person" in page
    sample = _sample(answer)
    admin = admin_client.get(reverse("admin:learning_sample_change", args=[sample.pk]))
    assert "contains a secret: AWS Access Key" in admin.content.decode()
    listing = admin_client.get(reverse("admin:learning_sample_changelist"), {"secret": "yes"})
    assert listing.status_code == 200 and f"/learning/sample/{sample.pk}/" in listing.text
    clean = admin_client.get(reverse("admin:learning_sample_changelist"), {"secret": "no"})
    assert f"/learning/sample/{sample.pk}/" not in clean.text


def test_the_migration_sets_aside_ready_samples_made_before_the_detector(alice, sent) -> None:
    import importlib

    from django.apps import apps

    migration = importlib.import_module("webapp.learning.migrations.0011_samples_with_secrets")
    clean, pasted = _turn(alice, "Hi"), _turn(alice, "Hi again")
    for answer in (clean, pasted):
        feedback_set(message=answer, author=alice, rating=1)
        judge_message(answer.pk, judge=Judge())
    # as a sample made before secrets were looked for: ready, the comment holding the key
    feedback_set(message=pasted, author=alice, rating=1, comment=f"key: {GITHUB_TOKEN}")
    Sample.objects.filter(message=pasted).update(status="ready", exclusion_reason="")
    migration.set_aside(apps, None)
    assert _sample(clean).status == "ready"
    assert _sample(pasted).status == "excluded"
    assert "GitHub Token in the comment" in _sample(pasted).exclusion_reason
