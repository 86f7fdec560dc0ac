"""A reload while an answer is written, in headless Chromium against the whole stack and the
real model, with the engine busy serving other people's answers (so the answer is still being
written when the page comes back): the reloaded page keeps streaming it, Stop works there, and
an answer left alone ends on the reloaded page without another reload."""

from __future__ import annotations

import re

import pytest

from tests.browser.busy import engine_busy
from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import ANSWER_TIMEOUT_MS, answer_id, sign_up

pytestmark = [
    pytest.mark.browser,
    pytest.mark.stack,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

STREAM_TEXT = "document.querySelector('#message-{id}-stream')?.textContent.trim().length || 0"


def _send_and_wait_for_words(page, text: str) -> tuple[int, int]:
    """Send ``text``; (the answer's id, how much of it is on the page) once words arrive."""
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")
    page.wait_for_selector("article.message.assistant.status-streaming", timeout=ANSWER_TIMEOUT_MS)
    answer = answer_id(page)
    shown = STREAM_TEXT.format(id=answer)
    page.wait_for_function(f"() => ({shown}) > 0", timeout=ANSWER_TIMEOUT_MS)
    return answer, page.evaluate(f"() => {shown}")


def test_when_the_page_reloads_mid_answer_then_it_keeps_streaming_and_stop_still_works(
    stack, browser
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    try:
        sign_up(page, stack.web_url, "reloader")
        with engine_busy(stack, streams=2):
            page.fill("#composer-input", "Hello!")
            page.press("#composer-input", "Enter")
            page.wait_for_url(re.compile(r"/chat/\d+/$"))
            page.wait_for_selector(
                "article.message.assistant:not(.status-streaming)", timeout=ANSWER_TIMEOUT_MS
            )

            answer, before = _send_and_wait_for_words(
                page, "Write a long story about a dragon who learns to bake bread."
            )
            page.reload()
            # The answer is still being written: shown so, with Stop in place of Send ...
            page.wait_for_selector(f"#message-{answer}.status-streaming")
            assert page.is_visible("#stop-button") and not page.is_visible("#send-button")
            # ... and it goes on streaming into the reloaded page, past what the old one had.
            page.wait_for_function(
                f"() => ({STREAM_TEXT.format(id=answer)}) > {before}", timeout=ANSWER_TIMEOUT_MS
            )
            page.click("#stop-button")
            stopped = f"#message-{answer}.status-stopped"
            page.wait_for_selector(stopped, timeout=ANSWER_TIMEOUT_MS)
            assert "Stopped before the end." in page.inner_text(stopped)
            assert page.inner_text(f"#message-{answer}-content").strip()  # what was written
            page.wait_for_selector("#send-button", state="visible")

            # Reloaded and left alone, an answer ends on the reloaded page.
            answer, _ = _send_and_wait_for_words(page, "Now tell me about its first loaf.")
            page.reload()
            page.wait_for_selector(
                f"#message-{answer}:not(.status-streaming)", timeout=ANSWER_TIMEOUT_MS
            )
            assert page.query_selector(f"#message-{answer}.status-complete") is not None
            assert page.inner_text(f"#message-{answer}-content").strip()
            page.wait_for_selector("#send-button", state="visible")
    finally:
        context.close()
    rows = stack.sql(
        "SELECT m.status, length(m.content) FROM chat_message m"
        " JOIN chat_conversation c ON c.id = m.conversation_id"
        " JOIN auth_user u ON u.id = c.owner_id"
        " WHERE u.username = 'reloader' AND m.role = 'assistant' ORDER BY m.id"
    )
    assert [status for status, _ in rows] == ["complete", "stopped", "complete"]
    assert all(length > 0 for _, length in rows)
