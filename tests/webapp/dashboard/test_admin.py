"""The admin: every page renders with data, list pages cost a fixed number of queries, pages
link along the learning chain, actions call their services, and non-staff get nothing."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from tests.webapp.dashboard.conftest import judged, sampled, turn
from webapp.api.models import ApiKey
from webapp.chat.models import Conversation, Feedback, Message
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.services import message_evidence

pytestmark = [pytest.mark.django_db, pytest.mark.services]

PARLEY_MODELS = [
    Conversation,
    Message,
    Feedback,
    Judgement,
    Sample,
    TrainingUpdate,
    PolicyVersion,
    ApiKey,
]
LIST_QUERY_LIMIT = 12


def _url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _act(client, model, action: str, objects):
    return client.post(
        _url(model, "changelist"),
        {"action": action, "index": 0, ACTION_CHECKBOX_NAME: [o.pk for o in objects]},
    )


@pytest.fixture
def admin_client_(client, staff):
    client.force_login(staff)
    return client


def test_every_parley_model_is_registered() -> None:
    assert set(PARLEY_MODELS) <= set(admin.site._registry)


def test_every_registered_list_and_detail_page_renders_with_data(admin_client_, chain) -> None:
    for model in admin.site._registry:
        listing = admin_client_.get(_url(model, "changelist"))
        assert listing.status_code == 200, model
        obj = model._default_manager.order_by("pk").first()
        if obj is None:  # e.g. auth groups: nothing to open
            continue
        detail = admin_client_.get(_url(model, "change", obj.pk))
        assert detail.status_code == 200, model


def test_list_pages_filter_and_search(admin_client_, chain, alice) -> None:
    other = turn(alice, title="Weather", question="Will it rain?")
    checks = [
        (Conversation, {"source__exact": "api", "q": "session-Arithmetic"}, chain.conversation),
        (Message, {"turn_type__exact": "main", "q": "alice"}, chain.answer),
        (Feedback, {"rating__exact": "1", "q": "Nice"}, chain.feedback),
        (Judgement, {"score__exact": "1", "conversation": chain.conversation.pk}, chain.judgement),
        (Sample, {"status__exact": "consumed", "reward": "1.0"}, chain.sample),
        (TrainingUpdate, {"status__exact": "done"}, chain.update),
        (PolicyVersion, {"status__exact": "candidate"}, chain.version),
        (ApiKey, {"revoked_at__isempty": "1", "q": "laptop"}, chain.key),
    ]
    for model, params, expected in checks:
        response = admin_client_.get(_url(model, "changelist"), params)
        assert response.status_code == 200, model
        shown = list(response.context["cl"].result_list)
        assert expected in shown, model
    messages = admin_client_.get(_url(Message, "changelist"), {"q": "rain"}).context["cl"]
    assert set(messages.result_list) == {other, other.parent}


def test_sample_page_links_along_the_whole_chain(admin_client_, chain) -> None:
    page = admin_client_.get(_url(Sample, "change", chain.sample.pk)).content.decode()
    for model, obj in [
        (Message, chain.answer),
        (Conversation, chain.conversation),
        (Judgement, chain.judgement),
        (TrainingUpdate, chain.update),
        (PolicyVersion, chain.version),
    ]:
        assert f'href="{_url(model, "change", obj.pk)}"' in page, model


def test_judgement_page_shows_each_vote_and_links_on(admin_client_, chain) -> None:
    page = admin_client_.get(_url(Judgement, "change", chain.judgement.pk)).content.decode()
    assert "Too terse. \\boxed{-1}" in page and "<td>-1</td>" in page
    assert "[HINT_START]Show the working.[HINT_END]" in page
    assert _url(Sample, "change", chain.sample.pk) in page
    assert _url(TrainingUpdate, "change", chain.update.pk) in page
    assert _url(PolicyVersion, "change", chain.version.pk) in page


def test_update_page_shows_config_and_metrics_readably(admin_client_, chain) -> None:
    page = admin_client_.get(_url(TrainingUpdate, "change", chain.update.pk)).content.decode()
    assert "&quot;clip_high&quot;: 0.28" in page  # pretty JSON, escaped
    assert "<th>loss</th>" in page and "<th>clip_fraction</th>" in page
    assert "<td>0.3</td>" in page  # step 1's loss
    assert _url(PolicyVersion, "change", chain.version.pk) in page
    assert f"update__id__exact={chain.update.pk}" in page


def test_version_page_links_the_update_that_produced_it(admin_client_, chain) -> None:
    page = admin_client_.get(_url(PolicyVersion, "change", chain.version.pk)).content.decode()
    assert _url(TrainingUpdate, "change", chain.update.pk) in page
    assert "<td>probe_ppl</td><td>11</td>" in page
    listing = admin_client_.get(_url(PolicyVersion, "changelist")).content.decode()
    assert "step kl (gated)" in listing.lower() and "kl from base" in listing.lower()


def test_conversation_page_shows_its_messages_read_only(admin_client_, chain) -> None:
    response = admin_client_.get(_url(Conversation, "change", chain.conversation.pk))
    page = response.content.decode()
    assert chain.answer.content in page and chain.question.content in page
    assert f"message__id__exact={chain.answer.pk}" in page
    assert f"conversation={chain.conversation.pk}" in page
    inline = response.context["inline_admin_formsets"][0]
    assert not inline.has_add_permission and not inline.has_delete_permission


def _many(alice, n: int = 200) -> None:
    """``n`` rows of every model, linked like real ones, made in bulk."""
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=alice, title=f"c{i}", external_session_id=f"s{i}") for i in range(n)
    )
    live = PolicyVersion.objects.get(number=0)
    answers = Message.objects.bulk_create(
        Message(conversation=c, role="assistant", content=f"a{i}", policy_version=live)
        for i, c in enumerate(conversations)
    )
    Feedback.objects.bulk_create(Feedback(message=m, author=alice, rating=1) for m in answers)
    judgements = Judgement.objects.bulk_create(
        Judgement(message=m, fingerprint="x", source="prm", score=1, votes=[{"score": 1}])
        for m in answers
    )
    versions = PolicyVersion.objects.bulk_create(
        PolicyVersion(number=100 + i, parent=live, probe_metrics={"probe_kl": 0.1})
        for i in range(n)
    )
    updates = TrainingUpdate.objects.bulk_create(
        TrainingUpdate(
            algorithm="rl", status="done", base_version=live, produced_version=v, metrics=[]
        )
        for v in versions
    )
    Sample.objects.bulk_create(
        Sample(
            message=j.message,
            judgement=j,
            kind="rl",
            reward=1.0,
            status="consumed",
            update=u,
            policy_version=live,
        )
        for j, u in zip(judgements, updates, strict=True)
    )
    ApiKey.objects.bulk_create(
        ApiKey(owner=alice, name=f"k{i}", prefix=f"pk-{i}", secret_hash=f"{i:064d}")
        for i in range(n)
    )


def test_list_pages_with_200_rows_keep_a_bounded_query_count(
    admin_client_, chain, alice, django_assert_max_num_queries
) -> None:
    _many(alice)
    for model in PARLEY_MODELS:
        assert model.objects.count() >= 200, model
        with django_assert_max_num_queries(LIST_QUERY_LIMIT, info=str(model)):
            response = admin_client_.get(_url(model, "changelist"))
        assert response.status_code == 200
        assert len(response.context["cl"].result_list) == 100, model  # one full page


def test_export_conversations_as_jsonl(admin_client_, chain, bob) -> None:
    bobs = turn(bob, title="Bob's", question="Hello?")
    response = _act(admin_client_, Conversation, "export_jsonl", [chain.conversation])
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]
    assert [r["id"] for r in lines] == [chain.conversation.pk]
    record = lines[0]
    assert record["type"] == "conversation" and record["owner"] == "alice"
    assert [m["id"] for m in record["messages"]] == [chain.question.pk, chain.answer.pk]
    assert record["messages"][1]["feedback"][0]["comment"] == "Nice and short"
    assert bobs.conversation.pk not in [r["id"] for r in lines]


def test_export_judgements_and_samples_as_jsonl(admin_client_, chain) -> None:
    response = _act(admin_client_, Judgement, "export_jsonl", [chain.judgement])
    (record,) = [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]
    assert record["type"] == "judgement" and record["votes"] == chain.judgement.votes
    response = _act(admin_client_, Sample, "export_jsonl", [chain.sample])
    (record,) = [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]
    assert record["type"] == "sample" and record["update_id"] == chain.update.pk


def test_exclude_only_touches_ready_samples(admin_client_, chain, alice) -> None:
    ready = sampled(judged(turn(alice, title="Other")))
    response = _act(admin_client_, Sample, "exclude_from_training", [ready, chain.sample])
    assert response.status_code == 302
    ready.refresh_from_db()
    chain.sample.refresh_from_db()
    assert ready.status == "excluded" and chain.sample.status == "consumed"


def test_rejudge_queues_the_judge_and_says_which_evidence_is_unchanged(
    admin_client_, alice, no_broker, django_capture_on_commit_callbacks
) -> None:
    fresh = turn(alice, title="Fresh")
    seen = turn(alice, title="Seen")
    # The judgement of ``seen`` already covers its current evidence: re-judging keeps it.
    judged(seen, fingerprint=message_evidence(message=seen).fingerprint)
    side = turn(alice, title="Side")
    Message.objects.filter(pk=side.pk).update(turn_type="side")
    with django_capture_on_commit_callbacks(execute=True):
        response = _act(admin_client_, Message, "rejudge", [fresh, seen, side])
    assert sorted(no_broker) == sorted(
        [
            ("webapp.learning.tasks.judge_message", fresh.pk),
            ("webapp.learning.tasks.judge_message", seen.pk),
        ]
    )
    notes = [str(m) for m in response.wsgi_request._messages]
    assert "Queued 2 answer(s) for judging." in notes
    assert any(n.startswith("1 of them have the same evidence") for n in notes)
    assert any(f"{side.pk}: side turn" in n for n in notes)


def test_rejudge_from_judgements_queues_their_answers(
    admin_client_, chain, no_broker, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _act(admin_client_, Judgement, "rejudge", [chain.judgement])
    assert no_broker == [("webapp.learning.tasks.judge_message", chain.answer.pk)]


def test_roll_back_to_a_version_publishes_it(admin_client_, chain, monkeypatch) -> None:
    pushed: list[str] = []
    monkeypatch.setattr(
        "trainer.publish.push", lambda path, **kw: pushed.append(kw["lora_name"]) or []
    )
    _act(admin_client_, PolicyVersion, "make_live", [chain.version])
    chain.version.refresh_from_db()
    assert chain.version.status == "live" and pushed == ["parley-v1"]
    base = PolicyVersion.objects.get(number=0)
    assert base.status == "retired"
    _act(admin_client_, PolicyVersion, "make_live", [base])  # roll back to the base model
    base.refresh_from_db()
    chain.version.refresh_from_db()
    assert base.status == "live" and chain.version.status == "retired"


def test_revoke_api_keys(admin_client_, chain) -> None:
    _act(admin_client_, ApiKey, "revoke", [chain.key])
    chain.key.refresh_from_db()
    assert chain.key.revoked_at is not None


def test_learning_rows_are_view_only(admin_client_, chain) -> None:
    for model in (Judgement, Sample, TrainingUpdate, PolicyVersion):
        assert admin_client_.get(_url(model, "add")).status_code == 403
        assert admin_client_.get(_url(model, "delete", _pk(model, chain))).status_code == 403
        before = model.objects.count()
        admin_client_.post(_url(model, "change", _pk(model, chain)), {"status": "excluded"})
        assert model.objects.count() == before
    chain.sample.refresh_from_db()
    assert chain.sample.status == "consumed"


def _pk(model, chain) -> int:
    return {
        Judgement: chain.judgement,
        Sample: chain.sample,
        TrainingUpdate: chain.update,
        PolicyVersion: chain.version,
    }[model].pk


@pytest.mark.parametrize("who", ["anonymous", "alice"])
def test_non_staff_get_nothing_from_the_admin(client, chain, who, alice) -> None:
    if who == "alice":
        client.force_login(alice)
    for model in PARLEY_MODELS:
        for url in (_url(model, "changelist"), _url(model, "change", _pk_any(model))):
            response = client.get(url)
            assert response.status_code == 302, url
            assert response["Location"].startswith(reverse("admin:login")), url
    response = _act(client, Sample, "exclude_from_training", [chain.sample])
    assert response.status_code == 302
    chain.sample.refresh_from_db()
    assert chain.sample.status == "consumed"


def _pk_any(model) -> int:
    return model.objects.order_by("pk").values_list("pk", flat=True).first()


def test_versions_and_updates_show_and_filter_by_owner(admin_client_, chain, alice, bob) -> None:
    mine = PolicyVersion.objects.create(number=4, owner=alice, status="live")
    theirs = PolicyVersion.objects.create(number=5, owner=bob, status="live")
    my_update = TrainingUpdate.objects.create(algorithm="rl", owner=alice, produced_version=mine)
    their_update = TrainingUpdate.objects.create(algorithm="rl", owner=bob, produced_version=theirs)
    for model, alices, bobs, shared in [
        (PolicyVersion, mine, theirs, chain.version),
        (TrainingUpdate, my_update, their_update, chain.update),
    ]:
        listing = admin_client_.get(_url(model, "changelist"))
        page = listing.content.decode()
        assert ">alice<" in page and ">bob<" in page and ">shared<" in page, model
        assert f"?owner={alice.pk}" in page and "?owner=shared" in page, model
        only_alice = admin_client_.get(_url(model, "changelist"), {"owner": alice.pk})
        assert list(only_alice.context["cl"].result_list) == [alices], model
        only_shared = admin_client_.get(_url(model, "changelist"), {"owner": "shared"})
        assert shared in only_shared.context["cl"].result_list, model
        assert bobs not in only_shared.context["cl"].result_list, model
        by_name = admin_client_.get(_url(model, "changelist"), {"q": "bob"})
        assert list(by_name.context["cl"].result_list) == [bobs], model
        detail = admin_client_.get(_url(model, "change", alices.pk)).content.decode()
        assert "alice" in detail, model
