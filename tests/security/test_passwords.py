"""Sign-up refuses weak passwords (Django's validators), with the reason on the page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _sign_up(client, username: str, password: str):
    return client.post(
        reverse("signup"), {"username": username, "password1": password, "password2": password}
    )


@pytest.mark.parametrize(
    ("password", "reason"),
    [
        ("1", "too short"),
        ("12345678901234", "entirely numeric"),
        ("password1234", "too common"),
        ("mallory-the-user", "too similar"),
    ],
)
def test_a_weak_password_is_refused_with_a_visible_reason(
    client, settings, password, reason
) -> None:
    settings.SIGNUP_OPEN = True
    response = _sign_up(client, "mallory-the-user", password)
    assert response.status_code == 200
    assert reason in response.content.decode()
    assert not get_user_model().objects.filter(username="mallory-the-user").exists()


def test_a_strong_password_is_accepted(client, settings) -> None:
    settings.SIGNUP_OPEN = True
    assert _sign_up(client, "mallory", "violet-harbour-93").status_code == 302
    assert get_user_model().objects.filter(username="mallory").exists()
