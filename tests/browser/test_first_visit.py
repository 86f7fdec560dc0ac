"""A newcomer's first minute, in headless Chromium against the whole stack: a sign-up page that
says what Parley is, and a first message of only spaces refused like an empty one."""

from __future__ import annotations

import pytest

from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import sign_up

pytestmark = [
    pytest.mark.browser,
    pytest.mark.stack,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]


def test_sign_up_says_what_parley_does_in_its_own_style(stack, browser) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(stack.web_url + "/accounts/signup/")
    assert page.inner_text("main h1") == "Create your Parley account"
    assert "gets better the more you talk to it" in page.inner_text("main .lead")
    # Each field labelled above its box, with a one-line hint instead of Django's rule list.
    assert page.query_selector("main ul") is None
    assert "At least 10 characters" in page.inner_text("main")
    # A mismatch is said next to the field, and nothing is lost but the passwords.
    page.fill("#id_username", "first-visit")
    page.fill("#id_password1", "a-long-passphrase-7")
    page.fill("#id_password2", "another-passphrase-8")
    page.click("main button[type=submit]")
    assert page.is_visible("#id_password2-error")
    assert page.input_value("#id_username") == "first-visit"
    context.close()


def test_a_first_message_of_only_spaces_is_refused_and_leaves_no_conversation(
    stack, browser
) -> None:
    context = browser.new_context()
    page = context.new_page()
    sign_up(page, stack.web_url, "blank-first")
    page.fill("#composer-input", "   \n  ")
    page.click("#start-form button[type=submit]")
    page.wait_for_selector("#start-form .error:has-text('Type a message first.')")
    page.goto(stack.web_url + "/me/data/")
    assert "No conversations yet." in page.inner_text("table.data")
    context.close()
