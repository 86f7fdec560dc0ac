"""What Parley knows about you, in headless Chromium against Django's live server: a newcomer
finds the memory page from the chat and adds "Call me Sam", which is listed in their answers at
once; a proposal under an answer offers Keep · Edit · Dismiss, and Keep puts it on the page.
The proposal is made through the memory service in the test's database, as the judge makes one
from a comment.

``PARLEY_SCREENSHOT_DIR``: where to save the screenshots of the memory page and a proposal (not
saved unset)."""

from __future__ import annotations

import re

import pytest
from django.conf import settings as django_settings

from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import sign_up
from tests.browser.test_learning_status_live import _shot
from tests.factories import AnswerFactory
from webapp.memory import services
from webapp.memory.models import Memory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.services,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

SWAP_MS = 10_000


@pytest.fixture
def context(orm_beside_playwright, browser, monkeypatch):
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a: None)  # no worker: nothing queued
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context
    context.close()


@pytest.mark.django_db(transaction=True)
def test_when_a_newcomer_adds_call_me_sam_from_the_chat_then_it_is_in_their_answers(
    live_server, context, settings
) -> None:
    settings.SIGNUP_OPEN = True
    page = context.new_page()
    sign_up(page, live_server.url, "sam")
    page.click("#chat-guide a:has-text('What Parley knows about you')")
    page.wait_for_url(re.compile(r"/memory/$"))
    assert page.inner_text("h1") == "What Parley knows about you"
    assert "Nothing yet" in page.inner_text("#memory-list")

    page.fill("#memory-text", "Call me Sam")
    page.click("#memory-add button[type=submit]")
    page.wait_for_selector("#memory-list li.memory:has-text('Call me Sam')", timeout=SWAP_MS)
    item = page.inner_text("#memory-list li.memory")
    assert "in your answers now" in item and "you typed it" in item
    assert "1 of 50 memories" in page.inner_text("#memory-room")
    assert page.input_value("#memory-text") == ""
    _shot(page, "memory-page")
    (memory,) = Memory.objects.filter(owner__username="sam")
    assert (memory.text, memory.state) == ("Call me Sam", "active")

    # A refusal is said beside the box, and what was typed stays in it.
    page.fill("#memory-text", "x" * (django_settings.MEMORY_MAX_CHARS + 1))
    page.click("#memory-add button[type=submit]")
    page.wait_for_selector("#memory-add-error", timeout=SWAP_MS)
    assert page.get_attribute("#memory-add-error", "role") == "alert"
    assert len(page.input_value("#memory-text")) == django_settings.MEMORY_MAX_CHARS + 1


@pytest.mark.django_db(transaction=True)
def test_when_a_proposal_under_an_answer_is_kept_then_the_memory_page_lists_it(
    live_server, context, client, django_user_model
) -> None:
    user = django_user_model.objects.create_user("newcomer")
    answer = AnswerFactory(
        parent__conversation__owner=user,
        parent__conversation__title="Names",
        parent__content="What is my name?",
        content="I do not know your name.",
    )
    memory = services.memory_propose(
        owner=user,
        text="Call me Sam",
        source=Memory.Source.COMMENT,
        source_message=answer,
        source_text="Call me Sam from now on.",
    )
    assert memory is not None
    client.force_login(user)
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
    line = f"#message-{answer.pk} #memory-proposal-{memory.pk}"
    page.wait_for_selector(line)
    assert page.inner_text(line).split() == "Remember: “Call me Sam”? Keep · Edit · Dismiss".split()
    _shot(page, "chat-memory-proposal")

    page.click(f"{line} button:has-text('Keep')")
    page.wait_for_selector(f"{line}:has-text('Remembered: in your answers now')", timeout=SWAP_MS)
    memory.refresh_from_db()
    assert memory.state == "active"

    page.click(f"{line} a:has-text('What Parley knows about you')")
    page.wait_for_url(re.compile(r"/memory/$"))
    item = page.inner_text(f"#memory-{memory.pk}")
    assert "Call me Sam" in item and "in your answers now" in item
    assert "from your comment on" in item and "Names" in item
    assert page.query_selector("#memory-proposals") is None  # nothing left waiting
    page.click(f"#memory-{memory.pk} .memory-history summary")
    page.click(f"#memory-{memory.pk} .memory-edit summary")
    _shot(page, "memory-page-open")
