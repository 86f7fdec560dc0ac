"""A Content-Security-Policy that allows only the site's own files: no inline script or style.

The pages are rendered here and checked for anything the policy would block (an inline
``<script>``, a ``<style>`` element, a ``style=`` or ``on...=`` attribute), so a template that
adds one fails this test, not only the browser check (``tests/browser/test_csp.py``).
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

pytestmark = pytest.mark.django_db

INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>"  # a script without src
    r"|<style\b"  # a style element
    r"|\sstyle\s*="  # a style attribute
    r"|\son[a-z]+\s*=",  # an event-handler attribute
    re.IGNORECASE,
)


def _directives(response) -> dict[str, str]:
    header = response.headers["Content-Security-Policy"]
    return {
        part.split()[0]: " ".join(part.split()[1:]) for part in header.split(";") if part.strip()
    }


def _pages(client, admin_user, alice):
    from webapp.chat import services

    conversation = services.conversation_create(owner=alice)
    services.user_message_send(conversation=conversation, content="Hello")
    yield "login", client.get(reverse("login"))
    yield "signup", client.get(reverse("signup"))
    yield "admin login", client.get("/admin/login/")
    client.force_login(alice)
    yield "chat", client.get(reverse("chat:index"))
    yield "conversation", client.get(reverse("chat:conversation", args=[conversation.pk]))
    yield "api keys", client.get(reverse("api_keys"))
    yield "my data", client.get(reverse("privacy:my_data"))
    client.force_login(admin_user)
    yield "dashboard", client.get(reverse("dashboard:index"))
    yield "dashboard panel", client.get(reverse("dashboard:panel"))
    yield "admin", client.get("/admin/")
    yield "admin list", client.get("/admin/auth/user/")
    yield "admin change", client.get(f"/admin/auth/user/{alice.pk}/change/")


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="wonderland-42")


def test_every_page_has_a_policy_of_own_files_only(client, admin_user, alice, settings) -> None:
    settings.SIGNUP_OPEN = True
    for name, response in _pages(client, admin_user, alice):
        assert response.status_code == 200, name
        policy = _directives(response)
        assert policy["default-src"] == "'self'", name
        assert policy["script-src"] == "'self'", name
        assert policy["style-src"] == "'self'", name
        assert policy["object-src"] == "'none'", name
        assert policy["frame-ancestors"] == "'none'", name
        assert "unsafe" not in response.headers["Content-Security-Policy"], name


def test_no_page_has_inline_script_style_or_handlers(client, admin_user, alice, settings) -> None:
    settings.SIGNUP_OPEN = True
    for name, response in _pages(client, admin_user, alice):
        html = response.content.decode()
        assert not INLINE.findall(html), (name, INLINE.findall(html))
        # htmx would add a <style> for its indicators and may eval hx-vars: both off.
        if "htmx.min.js" in html:
            assert '"includeIndicatorStyles": false' in html, name
            assert '"allowEval": false' in html, name
