"""One conversation out of Parley, in headless Chromium against Django's live server: its owner
exports it as Markdown from the conversation's menu and gets the file, makes a share link and
copies it; a reader who is not logged in opens the link and reads the conversation with no
control to press; the owner revokes it, and the link is then "not found".

``PARLEY_SCREENSHOT_DIR``: where to save the screenshot of the shared page (not saved unset)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings

from tests.browser.conftest import CHROMIUM
from tests.browser.test_learning_status_live import _shot
from tests.factories import AnswerFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.services,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

SWAP_MS = 10_000
ANSWER = (
    "Three quick ideas:\n\n"
    "1. **Time Out Market** for a bit of everything.\n"
    "2. A *pastel de nata* at Manteigaria.\n"
    "3. Grilled sardines in Alfama."
)


@pytest.fixture
def owner_page(orm_beside_playwright, browser, live_server, client, django_user_model, monkeypatch):
    """The owner, logged in, on her conversation: a question about Lisbon and its answer."""
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a: None)  # no worker: nothing queued
    user = django_user_model.objects.create_user("traveller")
    answer = AnswerFactory(
        parent__conversation__owner=user,
        parent__conversation__title="Lunch in Lisbon",
        parent__content="Where should I eat in Lisbon?",
        content=ANSWER,
    )
    client.force_login(user)
    context = browser.new_context(viewport={"width": 1100, "height": 760}, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    page = context.new_page()
    page.goto(f"{live_server.url}/chat/{answer.conversation_id}/")
    yield page
    context.close()


def _reader(browser):
    return browser.new_context(viewport={"width": 1000, "height": 720})


@pytest.mark.django_db(transaction=True)
def test_when_the_owner_exports_and_shares_then_a_stranger_reads_it_until_it_is_revoked(
    owner_page, browser
) -> None:
    page = owner_page
    page.click(".conversation-menu summary")
    with page.expect_download() as download_info:
        page.click("text=Export as Markdown")
    download = download_info.value
    assert download.suggested_filename == "parley-lunch-in-lisbon.md"
    text = Path(download.path()).read_text()
    assert text.startswith("# Lunch in Lisbon\n")
    assert "Where should I eat in Lisbon?" in text and "**Time Out Market**" in text

    assert page.query_selector(".conversation-menu[open]") is None  # a choice closes the menu

    page.click(".conversation-menu summary")
    page.click("button:has-text('Share…')")
    page.wait_for_selector("#share-panel .share-url", timeout=SWAP_MS)
    page.wait_for_selector(".conversation-menu[open]", state="detached", timeout=SWAP_MS)
    url = page.input_value("#share-panel .share-url")
    assert "/s/" in url
    page.click("#share-panel .copy-share-link")
    page.wait_for_selector("#share-panel .copy-share-link:has-text('Copied')", timeout=SWAP_MS)
    assert page.evaluate("navigator.clipboard.readText()") == url

    reader = _reader(browser)
    shared = reader.new_page()
    response = shared.goto(url)
    assert response is not None and response.status == 200
    assert shared.inner_text("h1") == "Lunch in Lisbon"
    assert shared.inner_text("header.topbar") == "Shared from Parley"
    assert "Where should I eat in Lisbon?" in shared.inner_text("#transcript")
    assert shared.inner_text("article.message.assistant strong") == "Time Out Market"
    for control in ("form", "textarea", "button", "input", ".feedback", ".sidebar", "nav"):
        assert shared.query_selector(control) is None, control
    assert "traveller" not in shared.content()
    _shot(shared, "shared-conversation")

    page.click("#share-panel button:has-text('Revoke')")
    page.wait_for_selector("#share-panel:has-text('Link revoked')", timeout=SWAP_MS)
    gone = shared.reload()
    assert gone is not None and gone.status == 404
    reader.close()
