"""Every page fits a phone: walked at 390 × 844 in headless Chromium against the whole stack,
signed out, as a person with a conversation, an API key, a memory and a shared link, as anyone
with that link, and as the admin. Nothing may reach past the screen's right edge or be cut off
inside a box that scrolls sideways (code blocks and wide tables excepted: they scroll on
purpose; so is a one-line title that ends in an ellipsis)."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_streaming import ANSWER_TIMEOUT_MS, sign_up

pytestmark = [
    pytest.mark.browser,
    pytest.mark.stack,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

WIDTH = 390
PASSWORD = "a-long-passphrase-7"

# What reaches past the screen, or is clipped in a box that scrolls sideways, as "tag#id.class".
OVERFLOWING = """(width) => {
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (typeof e.className === "string" && e.className ? "." + e.className.split(" ").join(".") : "");
  const scrollsOnPurpose = (e) => e.closest("pre, .code-block, .table-scroll");
  const out = [];
  for (const e of document.body.querySelectorAll("*")) {
    const box = e.getBoundingClientRect();
    const style = getComputedStyle(e);
    if (!box.width || style.visibility === "hidden" || scrollsOnPurpose(e)) continue;
    if (e.closest("[hidden], .visually-hidden, .skip-link")) continue;
    if (box.right > width + 1) out.push(name(e) + " ends at " + Math.round(box.right));
    // A one-line title cut with an ellipsis says it is cut: that is its design.
    const sideways = ["auto", "scroll", "hidden"].includes(style.overflowX) &&
      style.textOverflow !== "ellipsis";
    if (sideways && e.scrollWidth > e.clientWidth + 1 && e.tagName !== "TEXTAREA")
      out.push(name(e) + " clips " + (e.scrollWidth - e.clientWidth) + " px");
  }
  return out;
}"""


def _phone(browser):
    return browser.new_context(
        viewport={"width": WIDTH, "height": 844}, is_mobile=True, has_touch=True
    )


def _log_in(page, web_url: str, username: str, password: str) -> None:
    page.goto(web_url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("main button[type=submit]")


def _walk(page, urls: list[str]) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    for url in urls:
        response = page.goto(url)
        assert response is not None and response.status == 200, f"{url}: {response}"
        found = page.evaluate(OVERFLOWING, WIDTH)
        width = page.evaluate("document.scrollingElement.scrollWidth")
        if width > WIDTH:
            found.append(f"the page is {width} px wide")
        if found:
            problems[url] = found
    return problems


def test_every_page_fits_a_390_px_phone(stack, browser) -> None:
    web = stack.web_url
    phone = _phone(browser)
    page = phone.new_page()
    # Signed out: the front page, log-in and sign-up.
    problems = _walk(page, [web + "/", web + "/accounts/login/", web + "/accounts/signup/"])

    # A person with a conversation (a long title, a code block), a key, a memory.
    sign_up(page, web, "phone-walker")
    page.fill("#composer-input", "Show me a very long line: " + "x" * 120)
    page.press("#composer-input", "Enter")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    conversation = page.url
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    page.click(".conversation-menu summary")
    page.click("button:has-text('Share…')")
    page.wait_for_selector("#share-panel .share-url")
    shared = page.input_value("#share-panel .share-url")
    page.goto(web + "/settings/api-keys/")
    page.fill("#key-name", "a phone with a rather long key name")
    page.click("main button[type=submit]")
    page.wait_for_selector("#new-api-key")
    page.goto(web + "/memory/")
    page.fill("#memory-text", "Call me Sam, and answer in kilometres rather than miles.")
    page.click("#memory-add button[type=submit]")
    page.wait_for_selector("#memory-list .memory-text:has-text('Call me Sam')")
    person = [
        web + "/chat/",
        conversation,
        web + "/me/model/",
        web + "/memory/",
        web + "/me/data/",
        web + "/settings/api-keys/",
        web + "/settings/",
        web + "/settings/password/",
    ]
    problems.update(_walk(page, person))
    # The shared page, as anyone with the link sees it.
    problems.update(_walk(_phone(browser).new_page(), [shared]))

    # The admin's pages of Parley's own (the Django admin is its own).
    match = re.search(r"username '([^']+)', password '([^']+)'", stack.admin_line)
    assert match, stack.admin_line
    admin = _phone(browser).new_page()
    _log_in(admin, web, match.group(1), match.group(2))
    problems.update(_walk(admin, [web + "/dashboard/"]))
    admin.context.close()
    phone.close()
    assert problems == {}
