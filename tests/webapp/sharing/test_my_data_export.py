"""My data's export carries the person's settings and the share links of their conversations
(a revoked one without its address), and nothing of anyone else's."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.factories import ConversationFactory
from webapp.account.services import account_settings_update
from webapp.sharing.services import share_link_create, share_link_revoke

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_the_export_carries_my_settings_and_share_links(client, alice, bob, trip) -> None:
    account_settings_update(
        user=alice, train_consent_default=False, temperature=0.3, max_tokens=256
    )
    account_settings_update(user=bob, train_consent_default=True, temperature=1.1, max_tokens=128)
    live = share_link_create(conversation=trip.conversation)
    revoked = share_link_revoke(link=share_link_create(conversation=trip.other))
    share_link_create(conversation=ConversationFactory(owner=bob, title="Bob's"))
    client.force_login(alice)
    response = client.get(reverse("privacy:export"))
    lines = [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]
    (settings,) = [r for r in lines if r["type"] == "account_settings"]
    assert settings["owner"] == "alice" and settings["train_consent_default"] is False
    assert (settings["temperature"], settings["max_tokens"]) == (0.3, 256)
    links = {r["id"]: r for r in lines if r["type"] == "share_link"}
    assert set(links) == {live.pk, revoked.pk}
    assert links[live.pk]["path"] == f"/s/{live.token}/" and links[live.pk]["revoked_at"] is None
    assert links[revoked.pk]["path"] is None and links[revoked.pk]["revoked_at"]
    assert "bob" not in json.dumps(lines).lower()
