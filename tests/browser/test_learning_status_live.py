"""What the chat says about learning, in headless Chromium against the whole stack (the real
judge worker and model): the status under each answer is right straight after each kind of
feedback, without a reload, and never claims a judgement the user did not give without saying
it was read from their next message; the learning line over the composer follows; and an empty
chat says what Parley is, how to teach it and what to try first.

Every text each status showed on the way is recorded in the page (a MutationObserver), so a
wrong word shown for a moment fails the test too.

``PARLEY_SCREENSHOT_DIR``: where to save the screenshots docs/chat.md shows (not saved unset).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import ANSWER_TIMEOUT_MS, answer_id, sign_up
from webapp.frontdoor.fragments import FIRST_MESSAGES
from webapp.learning.selectors import PENDING

pytestmark = [
    pytest.mark.browser,
    pytest.mark.stack,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

JUDGED_MS = 120_000  # the judge worker beside the model and the trainer on 2 cores
# Where a rated answer's status may have got to by the time the test looks: the train worker
# trains every waiting sample within a minute or so.
RATED = re.compile(
    r"^(Will be learnt in (the next|a later) update|Being learnt|Learnt in version \d+"
    r"|Tried in version \d+, which did not pass the checks)$"
)

RECORD_STATUSES = """() => {
    window.statusLog = [];
    const record = () => document.querySelectorAll('.learning-status').forEach(el => {
        const text = el.innerText.trim();
        const last = window.statusLog.findLast(e => e.id === el.id);
        if (!last || last.text !== text) window.statusLog.push({id: el.id, text: text});
    });
    new MutationObserver(record).observe(document.body,
        {subtree: true, childList: true, characterData: true});
    record();
    window.notReloaded = true;
}"""


def _shot(page, name: str, *, full_page: bool = False) -> None:
    folder = os.environ.get("PARLEY_SCREENSHOT_DIR")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)


@pytest.fixture
def page(stack, browser, request):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_up(page, stack.web_url, re.sub(r"\W", "", request.node.name)[-30:])
    yield page
    context.close()


def _send(page, text: str) -> int:
    before = len(page.query_selector_all("article.message.assistant.status-complete"))
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(
        f"article.message.assistant.status-complete >> nth={before}", timeout=ANSWER_TIMEOUT_MS
    )
    return answer_id(page)


def _statuses(page, answer: int) -> list[str]:
    log = page.evaluate("window.statusLog")
    return [e["text"] for e in log if e["id"] == f"learning-status-{answer}"]


def _settles(page, answer: int, pattern: str) -> str:
    """Waits for the status under ``answer`` to match ``pattern`` (a regular expression), on
    this page as it is; returns the text."""
    page.wait_for_function(
        """([id, pattern]) => {
            const el = document.getElementById(id);
            return el && new RegExp(pattern).test(el.innerText.trim());
        }""",
        arg=[f"learning-status-{answer}", pattern],
        timeout=JUDGED_MS,
    )
    return page.inner_text(f"#learning-status-{answer}").strip()


def test_when_a_newcomer_opens_the_chat_then_it_says_what_parley_is_and_how_to_teach_it(
    page,
) -> None:
    guide = page.inner_text("#chat-guide")
    assert "learns from you" in guide
    for way in ("👍 or 👎", "A comment or a correction", "Just say so in the chat"):
        assert way in guide
    offered = [b.inner_text() for b in page.query_selector_all("#chat-guide .suggestions button")]
    assert offered == list(FIRST_MESSAGES)
    page.wait_for_selector("#learning-progress:has-text('Nothing new to learn from yet')")
    _shot(page, "chat-empty")
    # A suggestion starts the conversation with it, and the answer comes.
    page.click(f"#chat-guide button:has-text({FIRST_MESSAGES[0]!r})")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    assert page.inner_text("article.message.user .content").strip() == FIRST_MESSAGES[0]
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    assert not page.is_visible("#chat-guide")


def test_when_a_new_conversation_is_empty_then_a_suggestion_is_sent_over_its_socket(page) -> None:
    page.click("button.new-conversation")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    page.wait_for_selector("#chat-guide .suggestions button")
    page.click(f"#chat-guide button:has-text({FIRST_MESSAGES[1]!r})")
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    assert page.inner_text("article.message.user .content").strip() == FIRST_MESSAGES[1]
    assert not page.is_visible("#chat-guide")  # the guide steps aside once the chat begins


def test_when_each_kind_of_feedback_is_given_then_the_status_is_right_without_a_reload(
    page,
) -> None:
    page.fill("#composer-input", "Say hi.")
    page.press("#composer-input", "Enter")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    page.evaluate(RECORD_STATUSES)
    liked = answer_id(page)

    # 👍: saved, read, then what comes of it.
    page.hover(f"#message-{liked}")
    page.click(f"#thumb-up-{liked}")
    _settles(page, liked, RATED.pattern)
    # The learning line over the composer follows without a reload (pushed: it would ask by
    # itself only once a minute while nothing is under way).
    page.wait_for_selector(
        "#learning-progress:has-text('Parley has'), #learning-progress:has-text('Training')",
        timeout=30_000,
    )

    # 👎 + a reason + the answer wanted: right at once after the last change.
    corrected = _send(page, "What is the capital of France?")
    page.hover(f"#message-{corrected}")
    page.click(f"#thumb-down-{corrected}")
    panel = f"#feedback-panel-{corrected}"
    page.wait_for_selector(f"{panel}:has-text('What was wrong?')")
    page.click(f"{panel} button.tag >> nth=0")
    page.wait_for_selector(f"{panel} button.tag[aria-pressed=true]")
    page.fill(f"#correction-{corrected}", "The capital of France is Paris.")
    page.click(f"{panel} form.correction button[type=submit]")
    page.wait_for_selector(f"{panel} form.correction button:has-text('Update answer')")
    page.keyboard.press("Escape")
    _settles(page, corrected, RATED.pattern)
    detail = page.get_attribute(f"#learning-status-{corrected} a", "title")
    assert detail.startswith("judged -1") and "hint taken" in detail, detail

    # An answer never rated, followed by a new question: read from that next message.
    unrated = _send(page, "Name a colour.")
    _send(page, "Thanks. Now name an animal.")
    read = _settles(page, unrated, "^Read from your next message: ")
    page.mouse.move(0, 0)
    _shot(page, "chat-learning-status", full_page=True)

    # A comment alone (no thumb): read from the comment.
    commented = answer_id(page)
    page.hover(f"#message-{commented}")
    page.click(f"#more-feedback-{commented}")
    page.fill(f"#comment-{commented}", "Please answer in one short sentence.")
    page.click(f"#feedback-panel-{commented} form.comment button[type=submit]")
    page.wait_for_selector(
        f"#feedback-panel-{commented} form.comment button:has-text('Update comment')"
    )
    page.keyboard.press("Escape")
    _settles(page, commented, "^Read from your comment: ")

    assert page.evaluate("window.notReloaded") is True
    for rated in (liked, corrected):
        for text in _statuses(page, rated):
            assert text in ("", "Feedback saved", PENDING) or RATED.match(text), (rated, text)
    # Never a judgement the user did not give without saying where it was read.
    for text in _statuses(page, unrated):
        assert text == "" or text.startswith("Read from your next message: "), text
    assert read.startswith("Read from your next message: ")
