"""Settings: reached from the top bar, saved for the signed-in person alone, refused with a
visible reason when a value is out of range, and the password changed by Django's own views."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from webapp.account.models import AccountSettings
from webapp.account.selectors import answer_settings_for, train_consent_default_for

pytestmark = [pytest.mark.django_db, pytest.mark.services]

SAVE = {"train_consent_default": "", "temperature": "0.3", "max_tokens": "128"}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_every_page_links_to_settings_from_the_top_bar(alice) -> None:
    page = signed_in(alice).get(reverse("chat:index")).content.decode()
    assert '<a href="/settings/">Settings</a>' in page


def test_settings_show_the_username_and_the_sites_defaults_until_the_person_chooses(
    alice, settings
) -> None:
    settings.CHAT_TEMPERATURE, settings.CHAT_MAX_TOKENS = 0.7, 512
    response = signed_in(alice).get("/settings/")
    page = response.content.decode()
    assert response.status_code == 200
    assert '<strong id="settings-username">alice</strong>' in page
    assert 'name="train_consent_default" id="id_train_consent_default" checked' in page
    assert 'name="temperature" value="0.7"' in page
    assert '<option value="512" selected>Long — up to 512 tokens</option>' in page
    for url in (
        "/settings/api-keys/",
        "/me/data/",
        "/me/model/",
        "/memory/",
        "/settings/password/",
    ):
        assert f'href="{url}"' in page
    assert not AccountSettings.objects.exists()  # looking stores nothing


def test_saving_stores_the_choices_and_says_so(alice) -> None:
    client = signed_in(alice)
    response = client.post("/settings/", SAVE, follow=True)
    assert response.redirect_chain == [("/settings/", 302)]
    page = response.content.decode()
    assert "Settings saved." in page
    assert 'name="temperature" value="0.3"' in page
    assert '<option value="128" selected>Short — up to 128 tokens</option>' in page
    assert train_consent_default_for(user=alice) is False
    assert answer_settings_for(user=alice).as_params() == {"max_tokens": 128, "temperature": 0.3}


def test_a_temperature_above_two_is_refused_with_its_reason_shown_and_nothing_saved(
    alice,
) -> None:
    response = signed_in(alice).post("/settings/", {**SAVE, "temperature": "3"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was saved" in page
    assert 'id="id_temperature-error">Ensure this value is less than or equal to 2.' in page
    assert "Settings saved." not in page
    assert not AccountSettings.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("temperature", "-0.1", "greater than or equal to 0."),
        ("temperature", "0.75", "one decimal place"),
        ("temperature", "warm", "Enter a number."),
        ("max_tokens", "100000", "Select a valid choice."),
    ],
)
def test_other_values_out_of_range_are_refused_too(alice, field, value, reason) -> None:
    response = signed_in(alice).post("/settings/", {**SAVE, field: value})
    assert response.status_code == 400
    assert reason in response.content.decode()
    assert not AccountSettings.objects.exists()


def test_one_persons_settings_are_theirs_alone(alice, bob, settings) -> None:
    settings.CHAT_TEMPERATURE, settings.CHAT_MAX_TOKENS = 0.7, 512
    signed_in(alice).post("/settings/", SAVE)
    assert train_consent_default_for(user=bob) is True
    assert answer_settings_for(user=bob).as_params() == {"max_tokens": 512, "temperature": 0.7}
    page = signed_in(bob).get("/settings/").content.decode()
    assert 'name="temperature" value="0.7"' in page and "alice" not in page


def test_settings_ask_an_anonymous_visitor_to_log_in() -> None:
    response = Client().get("/settings/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_wrong_old_password_changes_nothing_and_says_why(alice) -> None:
    client = signed_in(alice)
    response = client.post(
        "/settings/password/",
        {
            "old_password": "not-my-password",
            "new_password1": "a-fresh-passphrase-9",
            "new_password2": "a-fresh-passphrase-9",
        },
    )
    assert response.status_code == 200
    assert "Your old password was entered incorrectly" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("wonderland-42")


def test_the_password_changes_with_the_old_one_and_the_person_stays_signed_in(alice) -> None:
    client = signed_in(alice)
    form = client.get("/settings/password/")
    assert form.status_code == 200 and 'name="old_password"' in form.content.decode()
    response = client.post(
        "/settings/password/",
        {
            "old_password": "wonderland-42",
            "new_password1": "a-fresh-passphrase-9",
            "new_password2": "a-fresh-passphrase-9",
        },
        follow=True,
    )
    assert response.redirect_chain == [("/settings/password/done/", 302)]
    assert "Password changed" in response.content.decode()
    assert client.get("/settings/").status_code == 200  # still signed in
    assert Client().login(username="alice", password="a-fresh-passphrase-9")
