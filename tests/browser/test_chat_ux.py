"""What a person expects of a chat app, in headless Chromium against the whole stack: copy,
edit, markdown rendered as it streams, highlighted code, quiet feedback in one panel, Send that
becomes Stop, the title renamed in place, and a layout that fits a desktop and a phone.

``PARLEY_SCREENSHOT_DIR``: where to save the screenshots docs/chat.md shows (not saved unset).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import ANSWER_TIMEOUT_MS, answer_id, sign_up
from webapp.learning.selectors import PENDING

pytestmark = [
    pytest.mark.browser,
    pytest.mark.stack,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

CODE = "def add(a, b):\n    return a + b"
WITH_CODE = f"Why does this fail?\n\n```python\n{CODE}\n```"


def _shot(page, name: str) -> None:
    folder = os.environ.get("PARLEY_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def _stop_if_writing(page) -> None:
    if page.is_visible("#stop-button"):
        page.keyboard.press("Escape")
    page.wait_for_selector("#send-button", state="visible", timeout=ANSWER_TIMEOUT_MS)


def _username(request) -> str:
    return re.sub(r"\W", "", request.node.name)[-30:]


@pytest.fixture
def chat(stack, browser, request):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack.web_url)
    page = context.new_page()
    sign_up(page, stack.web_url, _username(request))
    yield page
    context.close()


def _send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))


def test_code_is_highlighted_labelled_and_copied_and_a_message_copies_whole(chat) -> None:
    page = chat
    _send(page, WITH_CODE)
    _stop_if_writing(page)
    block = "article.message.user .code-block"
    assert page.inner_text(f"{block} .code-lang") == "python"
    assert page.query_selector(f"{block} pre span.k") is not None  # "def", "return"
    page.click(f"{block} .copy-code")
    assert page.evaluate("navigator.clipboard.readText()").strip() == CODE
    page.hover("article.message.user")
    page.click("article.message.user .copy-message")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("Why does this fail?") and "return a + b" in copied


def test_an_answer_renders_as_it_streams_where_send_becomes_stop(chat) -> None:
    page = chat
    _send(page, "Give me a short list of three fruits, in markdown.")
    # While it is written, Stop stands where Send was, and the text is already markdown.
    page.wait_for_selector("#composer #stop-button", state="visible", timeout=ANSWER_TIMEOUT_MS)
    assert not page.is_visible("#send-button")
    page.wait_for_selector(
        "article.status-streaming .stream p, article.status-streaming .stream li"
    )
    _shot(page, "chat-streaming")
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    assert page.is_visible("#send-button") and not page.is_visible("#stop-button")
    # Esc stops an answer; Shift+Enter is a new line, not a send.
    page.fill("#composer-input", "Another one")
    page.press("#composer-input", "Shift+Enter")
    page.type("#composer-input", "on two lines")
    assert page.input_value("#composer-input") == "Another one\non two lines"
    page.press("#composer-input", "Enter")
    page.wait_for_selector("#stop-button", state="visible", timeout=ANSWER_TIMEOUT_MS)
    page.keyboard.press("Escape")
    page.wait_for_selector("article.message.assistant.status-stopped", timeout=ANSWER_TIMEOUT_MS)
    # Every icon button says what it does.
    unlabelled = page.eval_on_selector_all(
        "button.icon", "els => els.filter(e => !e.getAttribute('aria-label')).length"
    )
    assert unlabelled == 0


def test_editing_a_sent_message_starts_a_branch_and_keeps_the_first(chat) -> None:
    page = chat
    _send(page, "Name a colour.")
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    first_answer = answer_id(page)
    page.hover("article.message.user")
    page.click("article.message.user .edit-message")
    box = "article.message.user .edit-form textarea"
    assert page.input_value(box) == "Name a colour."
    page.fill(box, "Name a fruit.")
    page.press(box, "Enter")
    page.wait_for_selector(
        "article.message.assistant.status-complete .content", timeout=ANSWER_TIMEOUT_MS
    )
    page.wait_for_selector("article.message.user .sibling-position:has-text('2/2')")
    assert "Name a fruit." in page.inner_text("article.message.user .content")
    assert answer_id(page) != first_answer
    page.click("article.message.user button[aria-label='Previous version']")
    page.wait_for_selector("article.message.user .sibling-position:has-text('1/2')")
    assert "Name a colour." in page.inner_text("article.message.user .content")
    assert answer_id(page) == first_answer


def test_feedback_is_quiet_icons_and_one_panel_that_a_thumbs_down_opens(chat) -> None:
    page = chat
    _send(page, "Say hi.")
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    first = answer_id(page)
    page.fill("#composer-input", "And bye.")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(
        "article.message.assistant.status-complete >> nth=1", timeout=ANSWER_TIMEOUT_MS
    )
    # An earlier answer's icons wait for the pointer; no expander or form shows by itself.
    opacity = f"getComputedStyle(document.querySelector('#thumb-up-{first}').parentNode).opacity"
    page.mouse.move(0, 0)
    page.wait_for_function(f"() => {opacity} === '0'")
    assert page.query_selector("#transcript details") is None
    assert not page.is_visible(f"#feedback-panel-{first}")
    page.hover(f"#message-{first}")
    page.wait_for_function(f"() => {opacity} === '1'")
    # 👎 asks what was wrong, in one panel: reasons, a comment, the answer wanted.
    page.click(f"#thumb-down-{first}")
    panel = f"#feedback-panel-{first}"
    page.wait_for_selector(f"{panel}:has-text('What was wrong?')")
    assert page.is_visible(f"{panel} button.tag") and page.is_visible(f"#correction-{first}")
    _shot(page, "chat-feedback-panel")
    page.click(f"{panel} button.tag >> nth=0")
    page.wait_for_selector(f"{panel} button.tag[aria-pressed=true]")
    page.fill(f"#comment-{first}", "Too formal.")
    page.click(f"{panel} form.comment button[type=submit]")
    page.wait_for_selector(f"{panel} form.comment button:has-text('Update comment')")
    # Keyboard focus stays where it was through the save, and Esc hands it back to the opener.
    focused = "document.activeElement.id"
    assert page.evaluate(focused) == f"save-comment-{first}"
    page.keyboard.press("Escape")
    assert not page.is_visible(panel)
    assert page.evaluate(focused) == f"more-feedback-{first}"
    # What became of it, in plain words, with the details a click away.
    status = page.inner_text(f"#learning-status-{first}")
    assert status in (PENDING, "Will be learnt in the next update"), status
    assert "judged" not in status
    page.reload()
    assert page.get_attribute(f"#thumb-down-{first}", "aria-pressed") == "true"
    assert not page.is_visible(panel)  # a given comment does not keep it open


def test_the_title_is_renamed_in_place_and_the_layout_fits_desktop_and_phone(
    chat, browser, stack, request
) -> None:
    page = chat
    page.set_viewport_size({"width": 1600, "height": 900})
    _send(page, "Plan a short walk in the park.")
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    # No strip beside the list: the sidebar starts at the window's left edge.
    assert page.eval_on_selector("#sidebar", "e => e.getBoundingClientRect().left") == 0
    assert page.get_attribute("nav[aria-label=Account] a[aria-current=page]", "href") == "/chat/"
    assert not page.is_visible("#conversation-title")  # no rename box until asked
    page.click(".conversation-title")
    page.fill("#conversation-title", "Walks")
    page.press("#conversation-title", "Enter")
    page.wait_for_selector(".conversation-title:has-text('Walks')")
    page.wait_for_selector("#conversation-list a[aria-current=page]:has-text('Walks')")
    page.set_viewport_size({"width": 1280, "height": 860})
    _shot(page, "chat-desktop")
    url = page.url

    phone = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    small = phone.new_page()
    small.goto(stack.web_url + "/accounts/login/")
    small.fill("#id_username", _username(request))
    small.fill("#id_password", "a-long-passphrase-7")
    small.click("button[type=submit]")
    small.goto(url)
    small.wait_for_selector("article.message.assistant")
    width = small.evaluate("document.scrollingElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    assert small.is_visible("#composer-input") and small.is_visible("#send-button")
    assert not small.is_visible("#sidebar")
    # On a touch screen the icons show without a pointer to hover.
    answer = answer_id(small)
    visible = f"getComputedStyle(document.querySelector('#thumb-up-{answer}').parentNode).opacity"
    assert small.evaluate(visible) == "1"
    _shot(small, "chat-phone")
    # The feedback panel and the list, opened, still fit the screen.
    small.click(f"#more-feedback-{answer}")
    small.wait_for_selector(f"#feedback-panel-{answer}:not([hidden])")
    assert small.evaluate("document.scrollingElement.scrollWidth") <= 390
    assert (
        small.eval_on_selector(
            f"#feedback-panel-{answer} .close-panel", "e => e.getBoundingClientRect().right"
        )
        <= 390
    )
    small.keyboard.press("Escape")
    small.click("#sidebar-toggle")
    assert small.is_visible("#sidebar")
    assert small.evaluate("document.scrollingElement.scrollWidth") <= 390
    phone.close()


def test_a_new_conversation_takes_its_first_messages_title_in_the_list_and_header(chat) -> None:
    page = chat
    page.click("button.new-conversation")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    page.fill("#composer-input", "Name three rivers.")
    page.press("#composer-input", "Enter")
    page.wait_for_selector("article.message.user")
    page.wait_for_selector(".conversation-title:has-text('Name three rivers.')")
    page.wait_for_selector("#conversation-list a[aria-current=page]:has-text('Name three rivers.')")
    assert page.query_selector("#transcript [id^=conversation-item-]") is None
    _stop_if_writing(page)
