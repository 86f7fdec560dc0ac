"""The chat pages and their htmx endpoints: ownership, feedback, navigation, escaping."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.webapp.chat.conftest import answer
from webapp.chat import services
from webapp.chat.models import Conversation, Feedback

pytestmark = [pytest.mark.django_db, pytest.mark.services]

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_front_page_leads_a_signed_in_user_to_the_chat(client, alice) -> None:
    client.force_login(alice)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == reverse("chat:index")


def test_chat_needs_a_login(client) -> None:
    response = client.get(reverse("chat:index"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_signup_creates_a_plain_user_and_logs_in(client, settings) -> None:
    settings.SIGNUP_OPEN = True
    assert b"Sign up" in client.get(reverse("login")).content
    response = client.post(
        reverse("signup"),
        {
            "username": "carol",
            "password1": "a-long-passphrase-1",
            "password2": "a-long-passphrase-1",
        },
    )
    assert response.status_code == 302
    page = client.get(reverse("chat:index"))
    assert page.status_code == 200 and page.context["user"].username == "carol"
    assert not page.context["user"].is_staff


def test_signup_is_closed_when_the_setting_is_off(client, settings) -> None:
    settings.SIGNUP_OPEN = False
    assert client.get(reverse("signup")).status_code == 404
    assert b"Sign up" not in client.get(reverse("login")).content


def test_starting_a_conversation_stores_the_message_and_answers_it_on_open(client, alice) -> None:
    client.force_login(alice)
    response = client.post(reverse("chat:new"), {"content": "Hello there"})
    conversation = Conversation.objects.get(owner=alice)
    assert response["Location"] == reverse("chat:conversation", args=[conversation.pk])
    question = conversation.messages.get()
    page = client.get(response["Location"]).content.decode()
    assert "Hello there" in page
    assert 'name="action" value="answer"' in page and f'value="{question.pk}"' in page
    assert f'ws-connect="/ws/chat/{conversation.pk}/"' in page


def test_a_first_message_of_only_whitespace_is_refused_and_creates_nothing(client, alice) -> None:
    client.force_login(alice)
    response = client.post(reverse("chat:new"), {"content": "  \n\t "})
    assert response.status_code == 400
    assert "Type a message first." in response.content.decode()
    assert not Conversation.objects.filter(owner=alice).exists()
    # "New chat" sends no content at all: it still opens an empty conversation.
    assert client.post(reverse("chat:new")).status_code == 302


def test_conversation_page_shows_answers_with_version_slot_and_feedback(client, chat, alice):
    conversation, _, reply = chat
    client.force_login(alice)
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert "<strong>4</strong>" in page
    assert 'class="policy-version"' in page and ">version 0<" in page
    assert f'id="learning-status-{reply.pk}"' in page
    assert f'id="thumb-up-{reply.pk}"' in page and "Write the answer you wanted" in page
    assert 'name="action" value="answer"' not in page
    assert "Use this conversation for training" in page


def test_another_users_pages_and_endpoints_answer_404(client, chat, bob) -> None:
    conversation, _, reply = chat
    client.force_login(bob)
    assert client.get(reverse("chat:conversation", args=[conversation.pk])).status_code == 404
    for name in ("rename", "delete", "consent"):
        response = client.post(reverse(f"chat:{name}", args=[conversation.pk]), {"title": "x"})
        assert response.status_code == 404, name
    for name, data in (("feedback", {"rating": "1"}), ("select", {})):
        assert client.post(reverse(f"chat:{name}", args=[reply.pk]), data).status_code == 404
    assert not Feedback.objects.exists()
    assert Conversation.objects.filter(pk=conversation.pk, title="What is 2+2?").exists()


def test_thumb_up_then_withdraw_and_the_page_shows_it(client, chat, alice) -> None:
    conversation, _, reply = chat
    client.force_login(alice)
    url = reverse("chat:feedback", args=[reply.pk])
    fragment = client.post(url, {"rating": "1"}, **HTMX).content.decode()
    assert f'id="feedback-{reply.pk}"' in fragment
    assert 'aria-pressed="true"' in fragment and "accurate" in fragment
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert re.search(rf'id="thumb-up-{reply.pk}"\s+class="icon thumb" aria-pressed="true"', page)
    client.post(url, {"rating": "0"}, **HTMX)
    assert Feedback.objects.get(message=reply).rating == 0


def test_tag_comment_and_correction_are_stored_and_shown(client, chat, alice) -> None:
    _, _, reply = chat
    client.force_login(alice)
    url = reverse("chat:feedback", args=[reply.pk])
    client.post(url, {"rating": "-1"}, **HTMX)
    client.post(url, {"tag": "too short"}, **HTMX)
    client.post(url, {"comment": "Say why."}, **HTMX)
    fragment = client.post(url, {"correction": "4, since 2+2=4."}, **HTMX).content.decode()
    feedback = Feedback.objects.get(message=reply, author=alice)
    assert (feedback.rating, feedback.tags, feedback.comment, feedback.correction) == (
        -1,
        ["too short"],
        "Say why.",
        "4, since 2+2=4.",
    )
    assert "Say why.</textarea>" in fragment and "4, since 2+2=4.</textarea>" in fragment


def test_unknown_tag_and_feedback_on_a_question_are_refused(client, chat, alice) -> None:
    _, question, reply = chat
    client.force_login(alice)
    assert (
        client.post(reverse("chat:feedback", args=[reply.pk]), {"tag": "rude"}).status_code == 400
    )
    response = client.post(reverse("chat:feedback", args=[question.pk]), {"rating": "1"})
    assert response.status_code == 400


def test_feedback_without_javascript_returns_to_the_message(client, chat, alice) -> None:
    conversation, _, reply = chat
    client.force_login(alice)
    response = client.post(reverse("chat:feedback", args=[reply.pk]), {"rating": "1"})
    url = reverse("chat:conversation", args=[conversation.pk])
    assert response["Location"] == f"{url}#message-{reply.pk}"


def test_sibling_navigation_returns_the_transcript_at_the_chosen_answer(client, chat, alice):
    conversation, question, reply = chat
    sibling = answer(conversation, question, "Four, as text.")
    client.force_login(alice)
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert "2/2" in page and "Four, as text." in page
    fragment = client.post(reverse("chat:select", args=[reply.pk]), **HTMX).content.decode()
    assert "1/2" in fragment and "<strong>4</strong>" in fragment
    assert "Four, as text." not in fragment
    assert reverse("chat:select", args=[sibling.pk]) in fragment


def test_rename_search_consent_and_delete(client, chat, alice) -> None:
    conversation, _, _ = chat
    client.force_login(alice)
    fragment = client.post(
        reverse("chat:rename", args=[conversation.pk]), {"title": "Arithmetic"}, **HTMX
    ).content.decode()
    assert 'value="Arithmetic"' in fragment and 'hx-swap-oob="true"' in fragment
    listing = client.get(reverse("chat:list"), {"q": "arith"}).content.decode()
    assert "Arithmetic" in listing
    assert "Arithmetic" not in client.get(reverse("chat:list"), {"q": "tax"}).content.decode()
    client.post(reverse("chat:consent", args=[conversation.pk]), {}, **HTMX)
    conversation.refresh_from_db()
    assert conversation.train_consent is False
    client.post(reverse("chat:consent", args=[conversation.pk]), {"train_consent": "on"}, **HTMX)
    conversation.refresh_from_db()
    assert conversation.train_consent is True
    response = client.post(reverse("chat:delete", args=[conversation.pk]), **HTMX)
    assert response["HX-Redirect"] == reverse("chat:index")
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_api_conversations_appear_in_the_list_with_feedback_buttons(client, alice) -> None:
    conversation = services.conversation_create(owner=alice, title="From OpenClaw", source="api")
    question = services.message_append(conversation=conversation, role="user", content="ping")
    reply = answer(conversation, question, "pong")
    client.force_login(alice)
    index = client.get(reverse("chat:index")).content.decode()
    assert "From OpenClaw" in index and ">API<" in index
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert f'id="thumb-down-{reply.pk}"' in page


@pytest.mark.parametrize(
    "payload", ["<script>alert('pwned')</script>", '<img src=x onerror="alert(1)">']
)
def test_html_in_a_user_or_model_message_renders_as_text(client, alice, payload) -> None:
    conversation = services.conversation_create(owner=alice)
    question = services.user_message_send(conversation=conversation, content=payload)
    answer(conversation, question, f"You wrote {payload}")
    client.force_login(alice)
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert payload not in page
    assert "alert(" in page  # still visible, as text
    assert "&lt;" in page
