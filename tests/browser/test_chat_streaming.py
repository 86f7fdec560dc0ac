"""The chat in a real browser: headless Chromium driven by Playwright, against the whole stack.

Debian's ``chromium`` (``apt-get install chromium``), not Playwright's own download.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.stack,
    pytest.mark.skipif(
        not CHROMIUM.exists() or shutil.which("chromium") is None,
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
]

ANSWER_TIMEOUT_MS = 180_000


def sign_up(page, web_url: str, username: str) -> None:
    page.goto(web_url + "/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_password1", "a-long-passphrase-7")
    page.fill("#id_password2", "a-long-passphrase-7")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/chat/$"))


def answer_id(page, nth: int = -1) -> int:
    ids = page.eval_on_selector_all(
        "article.message.assistant", "els => els.map(e => Number(e.dataset.messageId))"
    )
    return ids[nth]


def test_when_user_sends_message_then_reply_streams_into_transcript_and_feedback_is_kept(
    stack, browser
) -> None:
    context = browser.new_context()
    page = context.new_page()
    sign_up(page, stack.web_url, "ada")

    page.fill("#composer-input", "Say hello and name three colours.")
    page.press("#composer-input", "Enter")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    conversation_url = page.url
    # Tokens are on the page while the answer is still being written.
    page.wait_for_function(
        """() => {
            const s = document.querySelector('article.status-streaming .stream');
            return s && s.textContent.trim().length > 0;
        }""",
        timeout=ANSWER_TIMEOUT_MS,
    )
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    first = answer_id(page)
    first_text = page.inner_text(f"#message-{first}-content")
    assert first_text.strip()
    assert page.inner_text(f"#message-{first} .policy-version") == "version 0"
    assert page.query_selector(f"#learning-status-{first}") is not None

    page.click(f"#thumb-up-{first}")
    page.wait_for_selector(f'#thumb-up-{first}[aria-pressed="true"]')
    page.click(f"#more-feedback-{first}")
    page.fill(f"#comment-{first}", "Friendly and short, thanks.")
    page.click(f"#feedback-{first} form.comment button[type=submit]")
    page.wait_for_selector(f"#feedback-{first} .saved")

    page.reload()
    assert page.get_attribute(f"#thumb-up-{first}", "aria-pressed") == "true"
    assert page.input_value(f"#comment-{first}") == "Friendly and short, thanks."

    # Regenerate: a sibling answer to the same message, then back to the first one.
    page.click(f"#message-{first} .regenerate button")
    page.wait_for_selector(".sibling-position:has-text('2/2')", timeout=ANSWER_TIMEOUT_MS)
    page.wait_for_selector(
        "article.message.assistant.status-complete .sibling-position:has-text('2/2')",
        timeout=ANSWER_TIMEOUT_MS,
    )
    second = answer_id(page)
    assert second != first
    page.click(f"#message-{second} button[aria-label='Previous answer']")
    page.wait_for_selector(f"#message-{first} .sibling-position:has-text('1/2')")
    assert page.get_attribute(f"#thumb-up-{first}", "aria-pressed") == "true"
    page.click(f"#message-{first} button[aria-label='Next answer']")
    page.wait_for_selector(f"#message-{second} .sibling-position:has-text('2/2')")

    # A follow-up over the websocket: Enter sends, the box empties once it is stored,
    # Escape stops the answer.
    page.fill("#composer-input", "Thanks! One more, please.")
    page.press("#composer-input", "Enter")
    page.wait_for_selector("article.message.user:has-text('One more, please.')")
    page.wait_for_function("() => document.getElementById('composer-input').value === ''")
    page.wait_for_selector("#stop-button", state="visible", timeout=ANSWER_TIMEOUT_MS)
    page.keyboard.press("Escape")
    page.wait_for_selector("#stop-button", state="hidden", timeout=ANSWER_TIMEOUT_MS)
    assert page.query_selector("article.status-streaming") is None
    context.close()

    # Someone else: the conversation is not found, and neither are its answers.
    other = browser.new_context(viewport={"width": 390, "height": 844})
    page = other.new_page()
    sign_up(page, stack.web_url, "grace")
    response = page.goto(conversation_url)
    assert response is not None and response.status == 404
    token = next(c["value"] for c in other.cookies() if c["name"] == "csrftoken")
    for message_id in (first, second):
        posted = other.request.post(
            f"{stack.web_url}/chat/messages/{message_id}/feedback/",
            form={"rating": "-1"},
            headers={"X-CSRFToken": token, "Referer": stack.web_url + "/chat/"},
        )
        assert posted.status == 404
        selected = other.request.post(
            f"{stack.web_url}/chat/messages/{message_id}/select/",
            headers={"X-CSRFToken": token, "Referer": stack.web_url + "/chat/"},
        )
        assert selected.status == 404

    # On a phone-sized screen the list folds away behind a button; HTML typed in stays text.
    page.goto(stack.web_url + "/chat/")
    assert page.is_visible("#sidebar-toggle") and not page.is_visible("#sidebar")
    page.click("#sidebar-toggle")
    assert page.is_visible("#sidebar")
    page.fill(
        "#composer-input",
        '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>',
    )
    page.press("#composer-input", "Enter")
    page.wait_for_selector("article.message.user")
    assert "<img src=x" in page.inner_text("article.message.user .content")
    assert page.evaluate("window.__pwned") is None
    assert page.query_selector("article.message.user .content img") is None
    page.wait_for_selector("article.message.assistant", timeout=60_000)
    if page.is_visible("#stop-button"):
        page.click("#stop-button")
    page.wait_for_selector("article.message.assistant:not(.status-streaming)", timeout=60_000)
    other.close()
