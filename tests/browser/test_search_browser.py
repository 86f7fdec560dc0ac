"""Search in what was said, in headless Chromium against Django's live server: a word only an
answer holds, typed into the sidebar's search box, brings up that conversation with the passage
around the word and the word marked, and the result opens the conversation. The conversations
are written through the chat services in the test's database.

``PARLEY_SCREENSHOT_DIR``: where to save the screenshot docs/chat.md shows (not saved unset).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from tests.browser.conftest import CHROMIUM
from tests.factories import AnswerFactory, QuestionFactory
from webapp.chat import services

pytestmark = [
    pytest.mark.browser,
    pytest.mark.services,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

SWAP_MS = 10_000
FRIDGE = "Stell die Milch in den Kühlschrank, dort hält sie sich länger als im Regal."


@pytest.fixture
def quiet_outbox(monkeypatch):
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a: None)  # no worker: nothing queued


def _said(owner, title: str, question: str, answer: str) -> int:
    conversation = services.conversation_create(owner=owner, title=title)
    AnswerFactory(
        parent=QuestionFactory(conversation=conversation, content=question), content=answer
    )
    return conversation.pk


def _signed_in_page(browser, live_server, client, user):
    client.force_login(user)
    context = browser.new_context(viewport={"width": 1280, "height": 640})
    context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    return context.new_page()


@pytest.mark.django_db(transaction=True)
def test_when_a_word_only_an_answer_holds_is_typed_then_its_conversation_shows_it_marked(
    orm_beside_playwright, quiet_outbox, live_server, browser, client, django_user_model
) -> None:
    user = django_user_model.objects.create_user("searcher")
    milk = _said(user, "Keeping milk", "Where should I keep the milk?", FRIDGE)
    _said(user, "Bread", "Where should I keep bread?", "In a bread box, away from the sun.")
    _said(user, "Trip to Lisbon", "Which museums open on Mondays?", "The tile museum does.")
    _said(user, "Kitchen", "What should the new one cost?", "A good Kühlschrank costs 500 €.")
    page = _signed_in_page(browser, live_server, client, user)
    page.goto(f"{live_server.url}/chat/")
    assert page.locator("#conversation-list li").count() == 4

    page.locator("#conversation-search").press_sequentially("Kühlschrank", delay=20)
    page.wait_for_selector("#conversation-list li.search-hit mark", timeout=SWAP_MS)
    hits = page.locator("#conversation-list li.search-hit")
    assert sorted(hits.locator(".title").all_inner_texts()) == ["Keeping milk", "Kitchen"]
    hit = hits.filter(has_text="Keeping milk")
    assert hit.locator(".snippet mark").inner_text() == "Kühlschrank"
    assert "Stell die Milch in den Kühlschrank" in hit.locator(".snippet").inner_text()
    folder = os.environ.get("PARLEY_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / "search-results.png"))

    hit.locator("a").click()
    page.wait_for_url(re.compile(rf"/chat/{milk}/$"))
    assert FRIDGE in page.inner_text("article.message.assistant .content")
    page.context.close()
