"""Per-user limits: API keys, concurrent streams (websocket and /v1 together), requests a
minute over all of a user's keys (issue 17, "Resource abuse")."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from tests.factories import UserFactory
from webapp.api.keys import ApiKeyLimitReached, api_key_create, api_key_revoke


@pytest.mark.django_db
def test_a_user_gets_a_clear_error_past_the_key_limit_and_revoked_keys_do_not_count(
    settings,
) -> None:
    settings.USER_MAX_API_KEYS = 2
    user = UserFactory(username="hoarder")
    first, _ = api_key_create(owner=user)
    api_key_create(owner=user)
    with pytest.raises(ApiKeyLimitReached, match="2 active API keys"):
        api_key_create(owner=user)
    api_key_revoke(key=first)
    api_key_create(owner=user)  # a revoked key frees its place
    assert user.api_keys.count() == 3


@pytest.mark.django_db
def test_the_keys_page_shows_the_limit_instead_of_a_new_key(client, settings) -> None:
    settings.USER_MAX_API_KEYS = 1
    user = UserFactory(username="hoarder")
    client.force_login(user)
    assert b"new-api-key" in client.post("/settings/api-keys/", {"name": "one"}).content
    response = client.post("/settings/api-keys/", {"name": "two"})
    assert response.status_code == 200
    assert b"new-api-key" not in response.content
    assert b"1 active API key" in response.content
    assert user.api_keys.count() == 1


@pytest.mark.django_db
def test_the_management_command_refuses_past_the_key_limit(settings) -> None:
    settings.USER_MAX_API_KEYS = 1
    UserFactory(username="scripted")
    call_command("create_api_key", "--user", "scripted")
    with pytest.raises(CommandError, match="1 active API key"):
        call_command("create_api_key", "--user", "scripted")
