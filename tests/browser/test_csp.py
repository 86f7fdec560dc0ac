"""The chat, the admin and the dashboard work in a real browser under the Content-Security-Policy,
and the browser reports no violation of it (an inline script, style or handler it blocked).

Debian's ``chromium``, driven by Playwright, against the whole stack (as test_chat_streaming.py).
"""

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

# Every violation the page sees, kept on window (the listener is added before any page script).
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI} at ${e.sourceFile}`);
});
"""


def _violations(page, console: list[str]) -> list[str]:
    return list(page.evaluate("window.__csp || []")) + [
        line for line in console if "Content Security Policy" in line
    ]


def test_chat_admin_and_dashboard_work_under_the_policy_with_no_violation(stack, browser) -> None:
    context = browser.new_context()
    context.add_init_script(RECORD_VIOLATIONS)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    seen: list[str] = []

    def visit(url: str) -> None:
        page.goto(url)
        seen.extend(_violations(page, console))

    # The chat: sign up, send a message, the answer streams in over the websocket.
    sign_up(page, stack.web_url, "csp-check")
    response = page.goto(stack.web_url + "/chat/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.fill("#composer-input", "Name one colour.")
    page.press("#composer-input", "Enter")
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    page.wait_for_selector("article.message.assistant.status-complete", timeout=ANSWER_TIMEOUT_MS)
    seen.extend(_violations(page, console))

    # The admin, as the account the launcher printed.
    match = re.search(r"username '([^']+)', password '([^']+)'", stack.admin_line)
    assert match, stack.admin_line
    page.goto(stack.web_url + "/accounts/login/")
    page.fill("#id_username", match.group(1))
    page.fill("#id_password", match.group(2))
    with page.expect_navigation():
        page.click("main button[type=submit]")  # not the header's "Log out"
    visit(stack.web_url + "/admin/")
    assert page.is_visible("text=Site administration")
    visit(stack.web_url + "/admin/auth/user/")
    page.click("text=csp-check")
    page.wait_for_selector("#user_form")
    seen.extend(_violations(page, console))

    # The dashboard, through one of its htmx refreshes.
    visit(stack.web_url + "/dashboard/")
    with page.expect_response(re.compile(r"/dashboard/panel/"), timeout=60_000):
        pass
    seen.extend(_violations(page, console))
    context.close()
    assert seen == []
