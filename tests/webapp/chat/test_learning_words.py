"""The chat page in plain words: each answer's status asks again while its feedback waits for the
judge, the page carries the learning progress line, and an empty chat says what Parley is, how to
teach it and what to try first."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.webapp import cue_judge
from webapp.chat.models import Message
from webapp.frontdoor.fragments import FIRST_MESSAGES, STATUS_POLLS
from webapp.learning.selectors import PENDING
from webapp.learning.workflows.judging import judge_message

judge = cue_judge.judge  # the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.services]

HTMX = {"HTTP_HX_REQUEST": "true"}


def _status_url(message_id: int, poll: int) -> str:
    return f"{reverse('chat:learning_status', args=[message_id])}?poll={poll}"


def test_when_a_correction_is_saved_then_its_status_reads_it_and_asks_again_until_judged(
    client, chat, alice, judge
) -> None:
    _, _, reply = chat
    client.force_login(alice)
    url = reverse("chat:feedback", args=[reply.pk])
    client.post(url, {"rating": "-1"}, **HTMX)
    judge_message(reply.pk, judge=judge)
    bar = client.post(url, {"correction": "It is 4.", "panel": "open"}, **HTMX).content.decode()
    assert "Saved. Parley learns from it" in bar
    # never the older judgement's words, and it asks again in 2 s
    assert PENDING in bar and f'hx-get="{_status_url(reply.pk, 1)}"' in bar
    again = client.get(_status_url(reply.pk, 1)).content.decode()
    assert PENDING in again and f'hx-get="{_status_url(reply.pk, 2)}"' in again
    judge_message(reply.pk, judge=judge)
    done = client.get(_status_url(reply.pk, 2)).content.decode()
    assert "Will be learnt in the next update" in done and "hx-get" not in done
    assert 'title="judged -1 · hint taken"' in done


def test_the_status_stops_asking_after_its_last_poll(client, chat, alice, judge) -> None:
    _, _, reply = chat
    client.force_login(alice)
    client.post(reverse("chat:feedback", args=[reply.pk]), {"rating": "1"}, **HTMX)
    last = client.get(_status_url(reply.pk, STATUS_POLLS)).content.decode()
    assert PENDING in last and "hx-get" not in last  # the push brings the rest


def test_another_users_answer_status_is_404(client, chat, bob) -> None:
    _, _, reply = chat
    client.force_login(bob)
    assert client.get(_status_url(reply.pk, 0)).status_code == 404


def test_the_chat_page_loads_the_learning_progress_line(client, chat, alice) -> None:
    conversation, _, _ = chat
    client.force_login(alice)
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert f'hx-get="{reverse("mymodel:progress")}?on=chat"' in page
    assert 'id="learning-progress"' in page


def test_the_empty_chat_says_what_parley_is_and_the_three_ways_to_teach_it(client, alice) -> None:
    client.force_login(alice)
    page = client.get(reverse("chat:index")).content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    assert "Parley is a chat assistant that learns from you" in text
    assert "Three ways to teach it" in text
    for way in ("👍 or 👎", "A comment or a correction", "Just say so in the chat"):
        assert way in text
    for suggestion in FIRST_MESSAGES:
        assert f'<input type="hidden" name="content" value="{suggestion}">' in page
    assert 'id="learning-progress"' in page


def test_a_suggested_first_message_starts_a_conversation_with_it(client, alice) -> None:
    client.force_login(alice)
    response = client.post(reverse("chat:new"), {"content": FIRST_MESSAGES[0]})
    assert response.status_code == 302
    first = Message.objects.get(conversation__owner=alice)
    assert first.content == FIRST_MESSAGES[0]


def test_an_empty_conversation_offers_the_suggestions_over_its_socket(client, alice) -> None:
    client.force_login(alice)
    client.post(reverse("chat:new"))  # "+ New conversation": empty
    conversation = alice.conversations.get()
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert page.count('<form ws-send class="suggestion">') == len(FIRST_MESSAGES)
    assert "Three ways to teach it" in page
