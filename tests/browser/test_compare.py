"""After a bare 👎 the answer asks "Is one of them better?" with answers the model wrote in the
background: in headless Chromium against the whole stack (the judge worker samples them from
the real model), the person chooses one and it is kept as a +1 sample in the 👎's group.

``PARLEY_SCREENSHOT_DIR``: where to save the screenshot docs/chat.md shows (not saved unset)."""

from __future__ import annotations

import re

import pytest

from tests.browser.busy import LATER_WORK, engine_busy, queue_title_backlog, stack_redis
from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import ANSWER_TIMEOUT_MS, answer_id, sign_up
from tests.browser.test_chat_ux import _shot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.stack,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]


def test_a_bare_thumbs_down_offers_other_answers_and_the_choice_is_learnt(stack, browser) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    try:
        sign_up(page, stack.web_url, "comparer")
        page.fill("#composer-input", "Suggest a name for a cat.")
        page.press("#composer-input", "Enter")
        page.wait_for_url(re.compile(r"/chat/\d+/$"))
        page.wait_for_selector(
            "article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS
        )
        disliked = answer_id(page)
        page.hover(f"#message-{disliked}")
        page.click(f"#thumb-down-{disliked}")
        page.wait_for_selector(f"#feedback-panel-{disliked}:has-text('What was wrong?')")
        page.keyboard.press("Escape")  # nothing to add: a bare 👎
        compare = f"#compare-{disliked}"
        page.wait_for_selector(f"{compare}:has-text('Writing other answers')")
        page.wait_for_selector(
            f"{compare}:has-text('Is one of them better?')", timeout=ANSWER_TIMEOUT_MS
        )
        offered = page.query_selector_all(f"{compare} li.alternative")
        assert offered, "no answers offered"
        texts = [item.inner_text() for item in offered]
        assert all(text.strip() for text in texts)
        _shot(page, "chat-compare")
        choice = page.query_selector_all(f"{compare} li.alternative button")[-1]
        choice.click()
        page.wait_for_selector(f"{compare}:has-text('You chose answer {len(offered)} of')")
        # They never enter the transcript: one answer, no sibling arrows.
        assert len(page.query_selector_all("article.message.assistant")) == 1
        assert page.query_selector(f"#message-{disliked} .siblings") is None
        # Later, the answer says what was chosen and asks nothing.
        page.reload()
        page.wait_for_selector(f"{compare}:has-text('You chose answer')")
        assert page.query_selector(f"{compare} li.alternative button") is None
    finally:
        context.close()
    rows = stack.sql(
        "SELECT s.reward, s.group_key, m.turn_type FROM learning_sample s"
        " JOIN learning_judgement j ON j.id = s.judgement_id"
        " JOIN chat_message m ON m.id = s.message_id WHERE j.source = 'chosen'"
    )
    assert len(rows) == 1 and rows[0][0] == 1.0 and rows[0][2] == "unseen"
    (disliked_group,) = stack.sql(
        "SELECT group_key FROM learning_sample WHERE message_id = %s AND reward = -1", (disliked,)
    )
    assert rows[0][1] == disliked_group[0]


def test_when_the_machine_is_busy_then_the_comparison_still_arrives_ahead_of_other_work(
    stack, browser
) -> None:
    """Under load: the engine streams other people's answers and the judge queue holds a
    backlog of titles (each waits for the engine behind chat). The page says the answers are on
    their way or why they wait, never that they could not be written, and shows them while the
    backlog is still there: they took the judge worker's next slot."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    said: list[str] = []
    try:
        sign_up(page, stack.web_url, "busy-comparer")
        with engine_busy(stack, streams=2):
            page.fill("#composer-input", "Suggest a name for a dog.")
            page.press("#composer-input", "Enter")
            page.wait_for_url(re.compile(r"/chat/\d+/$"))
            page.wait_for_selector(
                "article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS
            )
            disliked = answer_id(page)
            conversation = int(page.url.rstrip("/").rsplit("/", 1)[1])
            queue_title_backlog(stack, conversation_id=conversation, count=40)
            broker = stack_redis(stack)
            assert broker.llen(LATER_WORK) > 0
            page.hover(f"#message-{disliked}")
            page.click(f"#thumb-down-{disliked}")
            page.wait_for_selector(f"#feedback-panel-{disliked}:has-text('What was wrong?')")
            page.keyboard.press("Escape")
            compare = f"#compare-{disliked}"
            page.wait_for_selector(f"{compare}[data-state]")
            while page.get_attribute(compare, "data-state") not in ("ready", "failed"):
                said.append(page.inner_text(compare))
                page.wait_for_timeout(1000)
                assert len(said) < ANSWER_TIMEOUT_MS / 1000, said[-1]
            backlog_left = broker.llen(LATER_WORK)
            assert page.get_attribute(compare, "data-state") == "ready", page.inner_text(compare)
            assert page.query_selector_all(f"{compare} li.alternative")
    finally:
        context.close()
    assert not any("could not be written" in text for text in said), said
    assert all("on their way" in t or "machine is busy" in t or "Writing" in t for t in said), said
    assert backlog_left > 0, "the answers waited for the whole backlog"
