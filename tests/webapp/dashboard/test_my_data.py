""" "My data": a user's export holds only their data; deleting a conversation takes its
untrained samples with it and says what had already been trained; others' ids are 404."""

from __future__ import annotations

import io
import json

import pytest
from django.urls import reverse

from tests.webapp.dashboard.conftest import judged, sampled, turn
from webapp.chat.feedback_spec import feedback_state
from webapp.chat.models import Conversation, Feedback, Message
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def _lines(response) -> list[dict]:
    return [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]


def test_my_data_needs_a_login(client) -> None:
    for url in (reverse("privacy:my_data"), reverse("privacy:export")):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_export_holds_only_my_conversations_feedback_and_what_was_made_of_them(
    client, chain, alice, bob
) -> None:
    bobs = turn(bob, title="Bob secret", question="Bob's private question")
    Feedback.objects.create(message=bobs, author=bob, rating=-1, comment="Bob's comment")
    sampled(judged(bobs))
    client.force_login(alice)
    response = client.get(reverse("privacy:export"))
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    assert "attachment" in response["Content-Disposition"]
    lines = _lines(response)
    text = json.dumps(lines)
    assert "Bob" not in text
    mine = set(Message.objects.filter(conversation__owner=alice).values_list("pk", flat=True))
    conversations = [r for r in lines if r["type"] == "conversation"]
    assert [c["id"] for c in conversations] == [chain.conversation.pk]
    assert all(c["owner"] == "alice" for c in conversations)
    feedback = [f for c in conversations for m in c["messages"] for f in m["feedback"]]
    assert feedback == [
        {
            "author": "alice",
            **feedback_state(chain.feedback),  # every field of the feedback spec, and the tags
            "history": [],
            "updated_at": chain.feedback.updated_at.isoformat(),
        }
    ]
    assert (feedback[0]["rating"], feedback[0]["comment"]) == (1, "Nice and short")
    others = [r for r in lines if r["type"] in ("judgement", "sample")]
    assert {r["type"] for r in others} == {"judgement", "sample"}
    assert all(r["message_id"] in mine for r in others)


def test_the_page_lists_what_each_conversation_left_in_training(client, chain, alice) -> None:
    waiting = turn(alice, title="Waiting")
    sampled(judged(waiting))
    client.force_login(alice)
    response = client.get(reverse("privacy:my_data"))
    rows = {c.title: f for c, f in response.context["rows"]}
    assert rows["Arithmetic"].trained_samples == 1 and rows["Waiting"].trained_samples == 0
    assert rows["Waiting"].untrained_samples == 1 and rows["Arithmetic"].untrained_samples == 0
    assert [v.label for v in rows["Arithmetic"].versions] == ["v1"]
    assert rows["Arithmetic"].messages == 2
    page = response.content.decode()
    assert "1 into v1" in page and "stays in the weights" in page


def test_deleting_a_conversation_takes_its_untrained_samples_and_reports_trained_ones(
    client, chain, alice
) -> None:
    # A newer judgement of the same answer left a ready sample beside the consumed one.
    ready = sampled(judged(chain.answer, fingerprint="newer"))
    keep = turn(alice, title="Keep me")
    kept_sample = sampled(judged(keep))
    client.force_login(alice)
    url = reverse("privacy:delete", args=[chain.conversation.pk])

    confirm = client.get(url).content.decode()
    assert "Already trained:" in confirm and "v1" in confirm and "1 training sample(s)" in confirm

    response = client.post(url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("privacy:my_data")
    notice = response.content.decode()
    assert "Deleted “Arithmetic”: 2 message(s) and 1 untrained sample(s)." in notice
    assert "1 sample(s) from it had already been trained into v1" in notice

    assert not Conversation.objects.filter(pk=chain.conversation.pk).exists()
    assert not Sample.objects.filter(pk__in=[ready.pk, chain.sample.pk]).exists()
    assert not Judgement.objects.filter(message__conversation=chain.conversation.pk).exists()
    assert not Feedback.objects.filter(pk=chain.feedback.pk).exists()
    # What was trained stays: the update and the version it produced are untouched.
    assert TrainingUpdate.objects.filter(pk=chain.update.pk).exists()
    assert PolicyVersion.objects.filter(pk=chain.version.pk).exists()
    assert Sample.objects.filter(pk=kept_sample.pk).exists()


def test_deleting_an_untrained_conversation_says_nothing_was_trained(client, alice) -> None:
    answer = turn(alice, title="Fresh")
    sample = sampled(judged(answer))
    client.force_login(alice)
    response = client.post(reverse("privacy:delete", args=[answer.conversation_id]), follow=True)
    assert "Nothing from it had been trained." in response.content.decode()
    assert not Sample.objects.filter(pk=sample.pk).exists()


def test_another_users_conversation_is_a_404(client, chain, bob) -> None:
    client.force_login(bob)
    url = reverse("privacy:delete", args=[chain.conversation.pk])
    assert client.get(url).status_code == 404
    assert client.post(url).status_code == 404
    assert Conversation.objects.filter(pk=chain.conversation.pk).exists()
    assert Sample.objects.filter(pk=chain.sample.pk).exists()
    assert _lines(client.get(reverse("privacy:export"))) == []


def test_the_export_carries_the_lineage_each_version_and_update_with_its_owner(
    client, chain, alice, bob, tmp_path
) -> None:
    from django.core.management import call_command

    mine = PolicyVersion.objects.create(number=2, owner=alice, parent=chain.version)
    theirs = PolicyVersion.objects.create(number=3, owner=bob, status="rejected")
    my_update = TrainingUpdate.objects.create(
        algorithm="rl", owner=alice, base_version=chain.version, produced_version=mine
    )
    TrainingUpdate.objects.create(algorithm="rl", owner=bob, produced_version=theirs)

    out = tmp_path / "export.jsonl"
    call_command("export_jsonl", "--out", str(out), stderr=io.StringIO())
    everything = [json.loads(line) for line in out.read_text().splitlines()]
    versions = [r for r in everything if r["type"] == "policy_version"]
    assert [(v["number"], v["owner"]) for v in versions] == [
        (0, None),
        (1, None),
        (2, "alice"),
        (3, "bob"),
    ]
    assert versions[2]["parent"] == 1 and versions[3]["status"] == "rejected"
    updates = [r for r in everything if r["type"] == "training_update"]
    assert [(u["owner"], u["produced_version"]) for u in updates] == [
        (None, 1),
        ("alice", 2),
        ("bob", 3),
    ]

    client.force_login(alice)
    lines = _lines(client.get(reverse("privacy:export")))
    assert [(r["number"], r["owner"]) for r in lines if r["type"] == "policy_version"] == [
        (2, "alice")
    ]
    [update] = [r for r in lines if r["type"] == "training_update"]
    assert (update["id"], update["owner"], update["base_version"]) == (my_update.pk, "alice", 1)
