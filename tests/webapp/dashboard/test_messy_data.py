"""Every admin, dashboard, chat and "My data" page renders on the data the loop really writes,
failures included: votes that did not parse (score None), empty hints and hint votes, updates
that failed before any metric, refused versions without gate metrics, excluded samples.

The admin's Judgements list once answered 500 on the first unparseable vote while every test,
fed only clean fixtures, passed; these pages are opened here on exactly such rows."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from tests.webapp.dashboard.conftest import sampled, turn
from webapp.learning.models import Judgement, PolicyVersion, TrainingUpdate

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def messy(alice) -> dict[str, object]:
    answer = turn(alice, title="Messy", question="Capital of Italy?")
    unparsed = Judgement.objects.create(
        message=answer,
        fingerprint="unparsed",
        source="prm",
        score=0,
        votes=[
            {"score": None, "text": "To find the answer you need to find the answer."},
            {"score": None, "text": ""},
            {"score": 1, "text": "Correct. \\boxed{1}"},
        ],
        hint="",
        hint_votes=["", "no hint needed"],
        judge_model="base",
        prompt_version="prm-1",
    )
    Judgement.objects.create(
        message=answer, fingerprint="empty", source="feedback", score=0, votes=[], hint_votes=[]
    )
    refused = PolicyVersion.objects.create(
        number=7, adapter_path="/adapters/v7", status="rolled_back", probe_metrics={}
    )
    failed = TrainingUpdate.objects.create(
        algorithm="combined", config={}, status="failed", metrics=[], summary={}, error="boom"
    )
    rejected = TrainingUpdate.objects.create(
        algorithm="rl",
        config={},
        status="rejected",
        produced_version=refused,
        metrics=[{"step": 0}, {"done": True}],
        summary={},
    )
    excluded = sampled(unparsed, status="excluded")
    return {"judgement": unparsed, "failed": failed, "rejected": rejected, "sample": excluded}


def test_every_admin_page_renders_with_unparsed_votes_empty_hints_and_missing_metrics(
    client, staff, messy
) -> None:
    client.force_login(staff)
    for model in admin.site._registry:
        meta = model._meta
        listing = client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        assert listing.status_code == 200, model
        for obj in model._default_manager.all()[:20]:
            url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
            assert client.get(url).status_code == 200, (model, obj.pk)


def test_judgements_list_shows_an_unparsed_vote_as_a_question_mark(client, staff, messy) -> None:
    client.force_login(staff)
    page = client.get(reverse("admin:learning_judgement_changelist")).content.decode()
    assert "? ? +1" in page


def test_dashboard_chat_and_my_data_render_with_messy_data(client, staff, alice, messy) -> None:
    client.force_login(staff)
    for name in ("dashboard:index", "dashboard:panel", "dashboard:data"):
        assert client.get(reverse(name)).status_code == 200, name
    client.force_login(alice)
    conversation = messy["judgement"].message.conversation
    assert client.get(reverse("chat:conversation", args=[conversation.pk])).status_code == 200
    assert client.get(reverse("privacy:my_data")).status_code == 200
    assert client.get(reverse("privacy:export")).status_code == 200
    assert client.get(reverse("mymodel:index")).status_code == 200
