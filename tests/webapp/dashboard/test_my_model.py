""" "My model": a user's own lineage with per-user ordinals and what taught each version, the
refused candidates, the samples not trained; roll back, reset and pause; the shared lineage
read-only in shared scope; another user's version ids are 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import JudgementFactory
from tests.webapp.dashboard.conftest import judged, sampled, turn
from webapp.chat.models import Feedback
from webapp.learning.models import Judgement, LearningPreference, PolicyVersion, TrainingUpdate
from webapp.learning.selectors import learning_statuses, policy_version_for
from webapp.learning.workflows import claiming

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture(autouse=True)
def user_scope(settings):
    settings.LEARNING_SCOPE = "user"


@pytest.fixture
def pushed(monkeypatch) -> list[str]:
    """Adapter pushes recorded instead of sent to vLLM."""
    names: list[str] = []
    monkeypatch.setattr(
        "trainer.publish.push", lambda path, **kw: names.append(kw["lora_name"]) or []
    )
    return names


def _version(owner, number: int, status: str, samples=(), **metrics) -> PolicyVersion:
    version = PolicyVersion.objects.create(
        number=number,
        owner=owner,
        adapter_path=f"/adapters/v{number}",
        status=status,
        probe_metrics=metrics,
    )
    TrainingUpdate.objects.create(
        algorithm="combined",
        owner=owner,
        status="rejected" if status == "rejected" else "done",
        produced_version=version,
        summary={"sample_ids": [getattr(s, "pk", s) for s in samples]},
    )
    return version


@pytest.fixture
def lineages(alice, bob) -> dict[str, object]:
    """Alice: v3 (retired; taught by 👍+comment, 👎+correction and a next state), bob's v5 in
    between, her v6 (live), v8 refused without metrics, v9 refused with reasons."""
    liked = turn(alice, title="Liked", question="Say hi")
    Feedback.objects.create(message=liked, author=alice, rating=1, comment="Nice")
    disliked = turn(alice, title="Disliked", question="Say bye")
    Feedback.objects.create(message=disliked, author=alice, rating=-1, correction="Bye!")
    followed = turn(alice, title="Followed", question="Count")
    taught = [
        sampled(JudgementFactory(message=liked, source="feedback"), status="consumed"),
        sampled(JudgementFactory(message=disliked, source="feedback"), status="consumed"),
        sampled(
            Judgement.objects.create(message=followed, fingerprint="n", source="prm", score=1),
            status="consumed",
        ),
    ]
    bobs_turn = turn(bob, title="Bob secret", question="Bob's question")
    return {
        "v3": _version(alice, 3, "retired", taught),
        "bob": _version(bob, 5, "live", [sampled(judged(bobs_turn), status="consumed")]),
        "v6": _version(alice, 6, "live"),
        "v8": _version(alice, 8, "rejected"),
        "v9": _version(alice, 9, "rejected", reasons=["probe ppl 31.0 > 1.5 × base"]),
        "liked": liked,
        "bobs_turn": bobs_turn,
    }


def test_my_model_needs_a_login(client) -> None:
    response = client.get(reverse("mymodel:index"))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_navigation_links_my_model_next_to_my_data(client, alice) -> None:
    client.force_login(alice)
    page = client.get(reverse("privacy:my_data")).content.decode()
    assert page.index("My data") < page.index(f'href="{reverse("mymodel:index")}"')


def test_the_page_lists_my_versions_newest_first_with_ordinals_and_what_taught_them(
    client, alice, lineages
) -> None:
    client.force_login(alice)
    page = client.get(reverse("mymodel:index")).content.decode()
    # Per-user ordinals in creation order (bob's v5 took a global number in between).
    assert page.index('v2</a> <span class="muted">(v6)') < page.index(
        'v1</a> <span class="muted">(v3)'
    )
    assert "(v5)" not in page and "Bob" not in page
    assert "Answering you now: <strong>your v2</strong> (v6)" in page
    assert "3 sample(s): 👍 1 · 👎 1 · comments 1 · corrections 1 · next state 1" in page
    v3 = lineages["v3"]
    assert reverse("mymodel:roll_back", args=[v3.pk]) in page
    assert reverse("mymodel:roll_back", args=[lineages["v6"].pk]) not in page  # live already
    # Refused candidates with their reasons; one refused without any metrics.
    assert 'v4</a> <span class="muted">(v9)' in page and "probe ppl 31.0 &gt; 1.5 × base" in page
    assert 'v3</a> <span class="muted">(v8)' in page and "no reason recorded" in page


def test_a_versions_page_links_to_the_turns_it_was_trained_on(client, alice, lineages) -> None:
    client.force_login(alice)
    page = client.get(reverse("mymodel:version", args=[lineages["v3"].pk])).content.decode()
    liked = lineages["liked"]
    conversation = reverse("chat:conversation", args=[liked.conversation_id])
    assert f"{conversation}#message-{liked.pk}" in page
    assert "Disliked" in page and "Followed" in page


def test_another_users_version_is_404_to_see_and_to_roll_back(
    client, alice, lineages, pushed
) -> None:
    client.force_login(alice)
    bobs = lineages["bob"]
    assert client.get(reverse("mymodel:version", args=[bobs.pk])).status_code == 404
    assert client.post(reverse("mymodel:roll_back", args=[bobs.pk])).status_code == 404
    base = PolicyVersion.objects.get(number=0)
    assert client.get(reverse("mymodel:version", args=[base.pk])).status_code == 404
    bobs.refresh_from_db()
    assert bobs.status == "live" and pushed == []


def test_rolling_back_publishes_my_earlier_version_and_says_so(
    client, alice, bob, lineages, pushed
) -> None:
    client.force_login(alice)
    response = client.post(reverse("mymodel:roll_back", args=[lineages["v3"].pk]), follow=True)
    assert "Rolled back: v1 (v3) answers you from now on." in response.content.decode()
    assert pushed == ["parley-v3"]
    assert policy_version_for(user=alice) == lineages["v3"]
    assert PolicyVersion.objects.get(pk=lineages["v6"].pk).status == "retired"
    assert policy_version_for(user=bob) == lineages["bob"]


def test_a_refused_version_cannot_be_rolled_back_to(client, alice, lineages, pushed) -> None:
    client.force_login(alice)
    response = client.post(reverse("mymodel:roll_back", args=[lineages["v9"].pk]), follow=True)
    assert "is rejected: nothing done" in response.content.decode() and pushed == []
    assert policy_version_for(user=alice) == lineages["v6"]


def test_the_actions_need_post_and_csrf(alice, lineages) -> None:
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get(reverse("mymodel:reset")).status_code == 405
    assert client.post(reverse("mymodel:reset")).status_code == 403
    assert client.post(reverse("mymodel:pause"), {"paused": "1"}).status_code == 403
    assert policy_version_for(user=alice) == lineages["v6"]


def test_resetting_goes_back_to_the_shared_model(client, alice, lineages) -> None:
    client.force_login(alice)
    page = client.post(reverse("mymodel:reset"), follow=True).content.decode()
    assert "Reset: the shared model (v0) answers you again" in page
    assert "Answering you now: <strong>the shared model</strong> (the base model)" in page
    assert PolicyVersion.objects.get(pk=lineages["v6"].pk).status == "rolled_back"
    assert policy_version_for(user=alice).number == 0
    again = client.post(reverse("mymodel:reset"), follow=True).content.decode()
    assert "You were already on the shared model" in again


def test_pausing_and_resuming_learning(client, alice) -> None:
    client.force_login(alice)
    page = client.post(reverse("mymodel:pause"), {"paused": "1"}, follow=True).content.decode()
    assert "Learning paused: your feedback is still recorded" in page
    assert "Learning is paused." in page and LearningPreference.objects.get(user=alice).paused
    page = client.post(reverse("mymodel:pause"), {"paused": "0"}, follow=True).content.decode()
    assert "Learning resumed" in page and not LearningPreference.objects.get(user=alice).paused


def test_htmx_posts_get_the_page_back_with_the_message(client, alice) -> None:
    client.force_login(alice)
    response = client.post(
        reverse("mymodel:pause"), {"paused": "1"}, headers={"HX-Request": "true"}, follow=True
    )
    assert response.status_code == 200 and 'id="my-model"' in response.content.decode()
    assert "Learning paused" in response.content.decode()


def test_in_shared_scope_the_page_shows_the_shared_lineage_read_only(
    client, settings, alice, bob, lineages
) -> None:
    settings.LEARNING_SCOPE = "shared"
    bobs = sampled(judged(lineages["bobs_turn"], fingerprint="s"))
    shared = _version(None, 11, "retired", [bobs])
    client.force_login(alice)
    page = client.get(reverse("mymodel:index")).content.decode()
    assert "Learning is shared" in page and 'v1</a> <span class="muted">(v11)' in page
    assert "(v3)" not in page and "roll-back" not in page and "Reset to the shared" not in page
    detail = client.get(reverse("mymodel:version", args=[shared.pk])).content.decode()
    assert "Bob" not in detail  # the shared version learned from bob, but shows only hers
    assert client.get(reverse("mymodel:version", args=[lineages["v3"].pk])).status_code == 404
    client.post(reverse("mymodel:reset"))
    assert PolicyVersion.objects.get(pk=lineages["v6"].pk).status == "live"


def test_the_page_shows_samples_waiting_and_excluded_with_reasons(client, alice, bob) -> None:
    waiting = turn(alice, title="Waiting", question="Later?")
    sampled(judged(waiting))
    refused = turn(alice, title="Refused", question="Again?")
    again = sampled(judged(refused))
    again.refusals = 2
    again.save(update_fields=["refusals"])
    dropped = turn(alice, title="Dropped", question="Never?")
    excluded = sampled(judged(dropped), status="excluded")
    excluded.exclusion_reason = "refused by the probe gate 3 times; last: probe KL too high"
    excluded.save(update_fields=["exclusion_reason"])
    sampled(judged(turn(bob, title="Bob waits", question="Bob?")))
    client.force_login(alice)
    page = client.get(reverse("mymodel:index")).content.decode()
    assert "2 sample(s) waiting (1 given back by a refused update)" in page
    assert "1 excluded" in page and "probe KL too high" in page
    assert "refused by the gate 2×" in page and "waiting for the next update" in page
    assert f"#message-{waiting.pk}" in page and "Bob waits" not in page


def test_under_opd_a_thumb_alone_says_it_is_not_trained_and_why(client, settings, alice) -> None:
    """opd claims only hinted or corrected samples: a 👍 alone stays ready for good, and the
    page and the chat's learning status say so instead of "waiting for the next update"."""
    settings.TRAIN_ALGORITHM = "opd"
    thumb = sampled(judged(turn(alice, title="Liked", question="Nice?")))
    Judgement.objects.filter(pk=thumb.judgement_id).update(source="feedback")
    thumb.hint = ""  # a 👍 alone: no hint, no correction
    thumb.save(update_fields=["hint"])
    hinted = sampled(judged(turn(alice, title="Hinted", question="Shorter?"), score=-1))
    hinted.hint = "Answer in one sentence."
    hinted.save(update_fields=["hint"])
    claimable = set(claiming.claimable_samples(algorithm="opd").values_list("pk", flat=True))
    assert claimable == {hinted.pk}  # the page agrees with the claim query
    client.force_login(alice)
    page = client.get(reverse("mymodel:index")).content.decode()
    assert "2 sample(s) waiting (1 of a kind the training algorithm does not use)" in page
    assert "not trained: opd trains only hints and corrections" in page
    assert page.count("waiting for the next update") == 1  # the hinted one
    status = learning_statuses(message_ids=[thumb.message_id, hinted.message_id])
    assert "not trained: opd trains only hints" in status[thumb.message_id].detail
    assert status[thumb.message_id].text == "Kept: the current training does not use it"
    assert "not trained" not in status[hinted.message_id].detail
    settings.TRAIN_ALGORITHM = "combined"
    again = learning_statuses(message_ids=[thumb.message_id])[thumb.message_id]
    assert "not trained" not in again.detail


def test_the_page_renders_with_messy_data(client, alice) -> None:
    """A refused version without metrics or a batch, votes that did not parse, an excluded
    sample without a reason, an update whose summary lists a sample since deleted."""
    answer = turn(alice, title="Messy", question="Capital of Italy?")
    unparsed = Judgement.objects.create(
        message=answer,
        fingerprint="unparsed",
        source="prm",
        score=0,
        votes=[{"score": None, "text": "To find it, find it."}, {"score": None, "text": ""}],
        hint_votes=["", "no hint needed"],
    )
    sampled(unparsed, status="excluded")
    version = PolicyVersion.objects.create(number=4, owner=alice, status="rejected")
    TrainingUpdate.objects.create(
        algorithm="rl", owner=alice, status="rejected", produced_version=version, summary={}
    )
    _version(alice, 7, "retired", [987654])
    client.force_login(alice)
    page = client.get(reverse("mymodel:index")).content.decode()
    assert "no reason recorded" in page
    assert client.get(reverse("mymodel:version", args=[version.pk])).status_code == 200


def test_the_page_costs_the_same_queries_however_long_the_lineage(client, alice) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(alice)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("mymodel:index")).status_code == 200
        return len(captured)

    _version(alice, 1, "retired", [sampled(judged(turn(alice, title="t0")))])
    few = queries()
    for number in range(2, 12):
        _version(alice, number, "retired", [sampled(judged(turn(alice, title=f"t{number}")))])
    assert queries() == few
