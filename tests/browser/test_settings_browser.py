"""Settings in headless Chromium against Django's live server: a person opens Settings from the
top bar, turns the training default off and picks short answers, saves, is told so, and the
conversation they start next is not used for training.

``PARLEY_SCREENSHOT_DIR``: where to save the screenshot of the settings page (not saved unset).
"""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import sign_up
from tests.browser.test_learning_status_live import _shot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.services,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]


@pytest.fixture
def page(orm_beside_playwright, browser, monkeypatch):
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a: None)  # no worker: nothing queued
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    yield context.new_page()
    context.close()


@pytest.mark.django_db(transaction=True)
def test_when_training_is_turned_off_in_settings_then_the_next_conversation_is_not_trained_on(
    live_server, page, settings
) -> None:
    settings.SIGNUP_OPEN = True
    sign_up(page, live_server.url, "dana")
    page.click("header.topbar a[href='/settings/']")
    page.wait_for_url(re.compile(r"/settings/$"))
    assert page.inner_text("h1") == "Settings"
    assert page.inner_text("#settings-username") == "dana"
    assert page.is_checked("#id_train_consent_default")

    page.uncheck("#id_train_consent_default")
    page.select_option("#id_max_tokens", "128")
    page.click("#settings-form button[type=submit]")
    page.wait_for_selector("#settings-saved")
    assert "Settings saved." in page.inner_text("#settings-saved")
    assert not page.is_checked("#id_train_consent_default")
    assert page.input_value("#id_max_tokens") == "128"
    assert page.get_attribute("header.topbar a[href='/settings/']", "aria-current") == "page"
    _shot(page, "settings", full_page=True)

    page.click("header.topbar a[href='/chat/']")
    page.click("button.new-conversation")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    assert not page.is_checked("#train-consent")
