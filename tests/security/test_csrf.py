"""CSRF: every form a browser can post is refused without the token; only /v1 (bearer keys,
no cookies) is exempt."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from webapp.api.models import ApiKey
from webapp.chat.models import Conversation, Feedback
from webapp.chat.services import conversation_create

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def _views(patterns=None, prefix: str = ""):
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            yield from _views(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def test_only_the_bearer_key_api_is_csrf_exempt() -> None:
    exempt = sorted(route for route, view in _views() if getattr(view, "csrf_exempt", False))
    assert exempt and all(route.startswith("v1/") for route in exempt), exempt
    # And the API authenticates with a bearer key only: a browser's session cookie is no key.


def _posts(owned, spare: Conversation) -> list[tuple[str, dict]]:
    conversation, answer = owned.conversation.pk, owned.answer.pk
    return [
        (reverse("chat:new"), {"content": "hello"}),
        (reverse("chat:rename", args=[conversation]), {"title": "renamed"}),
        (reverse("chat:consent", args=[conversation]), {}),  # consent off
        (reverse("chat:feedback", args=[answer]), {"rating": "1"}),
        (reverse("chat:select", args=[answer]), {}),
        (reverse("chat:delete", args=[conversation]), {}),
        (reverse("api_keys"), {"name": "sneaky"}),
        (reverse("api_key_revoke", args=[owned.key.pk]), {}),
        (reverse("privacy:delete", args=[spare.pk]), {}),
        (reverse("logout"), {}),
    ]


def test_every_signed_in_form_is_403_without_the_token_and_changes_nothing(alice) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice.user)
    spare = conversation_create(owner=alice.user)
    for url, data in _posts(alice, spare):
        assert client.post(url, data).status_code == 403, url
    conversation = Conversation.objects.get(pk=alice.conversation.pk)
    assert conversation.title == alice.conversation.title and conversation.train_consent
    assert Conversation.objects.filter(owner=alice.user).count() == 2
    assert not Feedback.objects.exists()
    assert list(ApiKey.objects.filter(owner=alice.user).values_list("revoked_at", flat=True)) == [
        None
    ]
    assert client.get(reverse("chat:index")).status_code == 200  # still signed in


def test_the_same_forms_pass_with_the_token(alice) -> None:
    """The control: the 403s above come from the missing token, not from anything else."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice.user)
    token = client.get(reverse("chat:conversation", args=[alice.conversation.pk])).context[
        "csrf_token"
    ]
    for url, data in _posts(alice, conversation_create(owner=alice.user)):
        response = client.post(url, {**data, "csrfmiddlewaretoken": str(token)})
        assert response.status_code in (200, 302), (url, response.status_code)


@pytest.mark.parametrize("name", ["login", "signup"])
def test_log_in_and_sign_up_are_403_without_the_token(name, alice, settings) -> None:
    settings.SIGNUP_OPEN = True
    client = Client(enforce_csrf_checks=True)
    data = {"username": "alice", "password": "wonderland-42"}
    data.update(password1="a-long-pass-1234", password2="a-long-pass-1234")
    assert client.post(reverse(name), data).status_code == 403
    assert "_auth_user_id" not in client.session


def test_admin_actions_are_403_without_the_token(alice) -> None:
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", password="root-pass-4242")
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    response = client.post(
        reverse("admin:api_apikey_changelist"),
        {"action": "delete_selected", "_selected_action": [alice.key.pk], "post": "yes"},
    )
    assert response.status_code == 403
    assert client.post(reverse("admin:login"), {"username": "root"}).status_code == 403
    assert ApiKey.objects.filter(pk=alice.key.pk).exists()
