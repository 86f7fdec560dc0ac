"""Share links in the admin (listed, revoked by an action, never added or edited there), and
gone with what they belong to: a conversation deleted from My data or the admin, an account
deleted in the admin."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.urls import reverse

from webapp.chat.models import Conversation
from webapp.sharing.models import ShareLink
from webapp.sharing.services import share_link_create

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def _url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def admin_client_(client, db):
    client.force_login(get_user_model().objects.create_superuser("root", password="root-4242"))
    return client


def test_the_admin_lists_links_and_revokes_them_but_never_adds_or_edits_one(
    admin_client_, trip
) -> None:
    link = share_link_create(conversation=trip.conversation)
    listing = admin_client_.get(_url(ShareLink, "changelist")).content.decode()
    assert "Lunch in Lisbon" in listing and "alice" in listing
    assert admin_client_.get(_url(ShareLink, "add")).status_code == 403
    admin_client_.post(
        _url(ShareLink, "changelist"),
        {"action": "revoke", "index": 0, ACTION_CHECKBOX_NAME: [link.pk]},
    )
    link.refresh_from_db()
    assert link.revoked_at is not None
    admin_client_.post(_url(ShareLink, "change", link.pk), {"revoked_at": ""})
    link.refresh_from_db()
    assert link.revoked_at is not None


def test_a_conversation_deleted_from_my_data_takes_its_link(client, alice, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    client.force_login(alice)
    client.post(reverse("privacy:delete", args=[trip.conversation.pk]))
    assert not ShareLink.objects.filter(pk=link.pk).exists()
    assert client.get(f"/s/{link.token}/").status_code == 404


def test_a_conversation_deleted_in_the_admin_takes_its_link(admin_client_, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    response = admin_client_.post(
        _url(Conversation, "delete", trip.conversation.pk), {"post": "yes"}, follow=True
    )
    assert response.status_code == 200
    assert not ShareLink.objects.filter(pk=link.pk).exists()


def test_an_account_deleted_in_the_admin_takes_every_link_of_its_owner(
    admin_client_, alice, trip
) -> None:
    links = [share_link_create(conversation=c) for c in (trip.conversation, trip.other)]
    user_model = get_user_model()
    admin_client_.post(_url(user_model, "delete", alice.pk), {"post": "yes"}, follow=True)
    assert not user_model.objects.filter(pk=alice.pk).exists()
    assert not ShareLink.objects.filter(pk__in=[link.pk for link in links]).exists()
