"""Nothing changes without a trace: trained data is read-only in the admin, the admin deletes
conversations only through the "My data" service (which says what was already trained), and
every admin change, action and delete leaves an audit record staff can read."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

from tests.webapp.dashboard.conftest import judged, sampled, turn
from webapp.api.models import ApiKey
from webapp.chat.feedback_spec import FIELDS, feedback_state
from webapp.chat.models import Conversation, Feedback, Message
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def _url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _act(client, model, action: str, objects, **extra):
    return client.post(
        _url(model, "changelist"),
        {"action": action, "index": 0, ACTION_CHECKBOX_NAME: [o.pk for o in objects], **extra},
        follow=True,
    )


def _log(obj, *, flag: int | None = None):
    entries = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(obj), object_id=str(obj.pk)
    )
    return entries.filter(action_flag=flag) if flag else entries


@pytest.fixture
def admin_client_(client, staff):
    client.force_login(staff)
    return client


def test_message_content_and_role_cannot_be_changed(admin_client_, chain) -> None:
    page = admin_client_.get(_url(Message, "change", chain.answer.pk))
    assert page.status_code == 200 and 'name="content"' not in page.content.decode()
    response = admin_client_.post(
        _url(Message, "change", chain.answer.pk),
        {"content": "rewritten", "role": "user", "conversation": chain.conversation.pk},
    )
    assert response.status_code == 403
    chain.answer.refresh_from_db()
    assert chain.answer.content == "Answer to What is 2+2?" and chain.answer.role == "assistant"
    assert admin_client_.get(_url(Message, "add")).status_code == 403
    assert admin_client_.get(_url(Message, "delete", chain.answer.pk)).status_code == 403


def test_no_field_of_a_feedback_can_be_changed(admin_client_, chain) -> None:
    before = feedback_state(chain.feedback)
    changed = {
        f.name: next(v for v in f.values if v != before[f.name]) if f.choices else "changed"
        for f in FIELDS
    }
    response = admin_client_.post(
        _url(Feedback, "change", chain.feedback.pk),
        {"message": chain.answer.pk, "author": chain.feedback.author_id, "tags": "[]", **changed},
    )
    assert response.status_code == 403
    chain.feedback.refresh_from_db()
    assert feedback_state(chain.feedback) == before
    assert admin_client_.get(_url(Feedback, "delete", chain.feedback.pk)).status_code == 403


def test_a_conversation_keeps_its_owner_and_messages_but_its_title_may_change(
    admin_client_, chain, bob
) -> None:
    response = admin_client_.post(
        _url(Conversation, "change", chain.conversation.pk),
        {
            "title": "Renamed",
            "owner": bob.pk,
            "train_consent": "",
            "source": "web",
            "external_session_id": "other",
            "messages-TOTAL_FORMS": 0,
            "messages-INITIAL_FORMS": 0,
        },
    )
    assert response.status_code == 302
    chain.conversation.refresh_from_db()
    assert chain.conversation.title == "Renamed"
    assert chain.conversation.owner_id == chain.answer.conversation.owner_id != bob.pk
    assert chain.conversation.train_consent is True
    (entry,) = _log(chain.conversation, flag=CHANGE)
    assert entry.user.username == "root" and "Title" in entry.get_change_message()


def test_the_admin_deletes_a_conversation_through_the_my_data_service(admin_client_, chain) -> None:
    sampled(judged(chain.answer, fingerprint="newer"))  # an untrained sample beside the trained
    url = _url(Conversation, "delete", chain.conversation.pk)
    confirm = admin_client_.get(url)
    assert confirm.status_code == 200
    assert "Already trained: 1 sample(s) into v1" in confirm.content.decode()

    response = admin_client_.post(url, {"post": "yes"}, follow=True)
    notice = response.content.decode()
    assert "2 message(s) and 1 untrained sample(s)" in notice
    assert "1 sample(s) from it had already been trained into v1" in notice
    assert not Conversation.objects.filter(pk=chain.conversation.pk).exists()
    assert TrainingUpdate.objects.filter(pk=chain.update.pk).exists()
    (entry,) = _log(chain.conversation, flag=DELETION)
    assert entry.user.username == "root"
    assert "via the admin" in entry.change_message and "trained into v1" in entry.change_message


def test_the_bulk_delete_action_goes_through_the_service_too(admin_client_, chain, alice) -> None:
    other = turn(alice, title="Other")
    response = _act(
        admin_client_,
        Conversation,
        "delete_selected",
        [chain.conversation, other.conversation],
        post="yes",
    )
    assert "already been trained into v1" in response.content.decode()
    assert not Conversation.objects.filter(owner=alice).exists()
    assert _log(chain.conversation, flag=DELETION).count() == 1
    assert _log(other.conversation, flag=DELETION).count() == 1


def test_deleting_a_user_in_the_admin_deletes_their_conversations_through_the_service(
    admin_client_, chain, alice
) -> None:
    user_model = get_user_model()
    response = admin_client_.post(
        _url(user_model, "delete", alice.pk), {"post": "yes"}, follow=True
    )
    assert response.status_code == 200
    assert not user_model.objects.filter(pk=alice.pk).exists()
    (entry,) = _log(chain.conversation, flag=DELETION)
    assert "trained into v1" in entry.change_message


def test_a_my_data_delete_leaves_a_record_of_who_deleted_it(client, chain, alice) -> None:
    client.force_login(alice)
    client.post(reverse("privacy:delete", args=[chain.conversation.pk]))
    (entry,) = _log(chain.conversation, flag=DELETION)
    assert entry.user == alice and "via My data" in entry.change_message


def test_every_admin_action_leaves_an_audit_record(admin_client_, chain, monkeypatch) -> None:
    monkeypatch.setattr("trainer.publish.push", lambda *a, **k: [])
    ready = sampled(judged(chain.answer, fingerprint="newer"))
    _act(admin_client_, Message, "rejudge", [chain.answer])
    _act(admin_client_, Judgement, "rejudge", [chain.judgement])
    _act(admin_client_, Sample, "exclude_from_training", [ready])
    _act(admin_client_, PolicyVersion, "make_live", [chain.version])
    _act(admin_client_, ApiKey, "revoke", [chain.key])
    _act(admin_client_, Conversation, "export_jsonl", [chain.conversation])
    for obj, words in [
        (chain.answer, "Re-judge"),
        (chain.judgement, "Re-judge"),
        (ready, "Exclude from training"),
        (chain.version, "Roll back"),
        (chain.key, "Revoke"),
        (chain.conversation, "Export"),
    ]:
        (entry,) = _log(obj, flag=CHANGE)
        assert entry.user.username == "root" and words in entry.change_message, obj


def test_the_audit_log_is_readable_by_staff_and_cannot_be_edited(admin_client_, chain) -> None:
    _act(admin_client_, ApiKey, "revoke", [chain.key])
    page = admin_client_.get(_url(LogEntry, "changelist"))
    assert page.status_code == 200 and "Revoke the selected API keys" in page.content.decode()
    entry = LogEntry.objects.get()
    assert admin_client_.get(_url(LogEntry, "change", entry.pk)).status_code == 200
    assert admin_client_.post(_url(LogEntry, "change", entry.pk), {}).status_code == 403
    assert admin_client_.get(_url(LogEntry, "delete", entry.pk)).status_code == 403


def test_every_parley_admin_audits_its_actions() -> None:
    from webapp.core.audit import AuditedAdmin

    parley = [m for m in admin.site._registry if m._meta.app_label in {"chat", "api", "learning"}]
    assert len(parley) == 9  # LearningPreference: who paused learning
    for model in [*parley, get_user_model()]:
        assert isinstance(admin.site._registry[model], AuditedAdmin), model
