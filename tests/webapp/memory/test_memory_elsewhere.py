"""Memory beyond its page: proposals under an answer in the chat (one query for the whole
transcript, and out of band with the answer's learning status once its feedback is judged),
the links to the page, My model's "What it knows about you", the My data export, and the API
keys' switch "Give my memories to this key's requests"."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import AnswerFactory, ConversationFactory, FeedbackFactory, QuestionFactory
from webapp.api.admission import key_and_version_lookup
from webapp.api.keys import api_key_create
from webapp.api.models import ApiKey
from webapp.memory import services
from webapp.memory.models import Memory

pytestmark = [pytest.mark.django_db, pytest.mark.services]

HTMX = {"HTTP_HX_REQUEST": "true"}


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _propose(answer, text: str = "Call me Sam") -> Memory:
    memory = services.memory_propose(
        owner=answer.conversation.owner,
        text=text,
        source=Memory.Source.CORRECTION,
        source_message=answer,
        source_text=text,
    )
    assert memory is not None
    return memory


def _slot(html: str, answer_id: int) -> str:
    """The proposals under one answer, as the page has them."""
    start = html.index(f'id="memory-proposals-{answer_id}"')
    return html[html.index(">", start) + 1 : html.index("</article>", start)]


def test_an_answer_shows_its_proposals_with_keep_edit_dismiss(client, alice) -> None:
    answer = AnswerFactory(parent__conversation__owner=alice)
    memory = _propose(answer)
    client.force_login(alice)
    html = client.get(reverse("chat:conversation", args=[answer.conversation_id])).content
    slot = _slot(html.decode(), answer.pk)
    # Keep · Edit · Dismiss, Edit opening a box to keep it in the person's own words
    assert _text(slot).startswith("Remember: “Call me Sam”? Keep · Edit Remember it in your words")
    assert _text(slot).endswith("· Dismiss")
    for action in ("keep", "dismiss"):
        assert f'hx-post="{reverse("memory:change", args=[memory.pk, action])}"' in slot
    assert 'name="place" value="chat"' in slot and 'hx-target="this"' in slot


def test_the_transcript_asks_for_proposals_once_however_many_answers(client, alice) -> None:
    conversation = ConversationFactory(owner=alice)
    parent = None

    def grow(count: int) -> None:
        nonlocal parent
        for index in range(count):
            question = QuestionFactory(conversation=conversation, content=f"Question {index}")
            parent = AnswerFactory(parent=question)
            _propose(parent, f"Call me Sam {parent.pk}")

    client.force_login(alice)
    url = reverse("chat:conversation", args=[conversation.pk])
    grow(2)
    client.get(url)  # the session and caches warm
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    grow(8)
    with CaptureQueriesContext(connection) as many:
        html = client.get(url).content.decode()
    assert html.count("Remember: “Call me Sam") == 10
    assert len(many) == len(few)
    assert sum("memory_memory" in q["sql"] for q in many.captured_queries) == 1


def test_the_status_poll_brings_proposals_once_the_feedback_is_judged(client, alice) -> None:
    answer = AnswerFactory(parent__conversation__owner=alice)
    client.force_login(alice)
    url = reverse("chat:learning_status", args=[answer.pk])
    FeedbackFactory(message=answer, author=alice, rating=-1, correction="Call me Sam.")
    pending = client.get(url + "?poll=1").content.decode()
    assert "hx-swap-oob" not in pending  # still reading it: nothing swapped under the answer
    answer.feedback.all().delete()
    _propose(answer)
    judged = client.get(url + "?poll=2").content.decode()
    slot = judged[judged.index(f'id="memory-proposals-{answer.pk}"') :]
    assert slot.startswith(f'id="memory-proposals-{answer.pk}" hx-swap-oob="true"')
    assert "Remember: “Call me Sam”?" in _text(slot)


def test_the_chat_links_to_the_memory_page(client, alice) -> None:
    client.force_login(alice)
    html = client.get(reverse("chat:index")).content.decode()
    memory = reverse("memory:index")
    assert f'<a href="{memory}" title="What Parley knows about you">Memory</a>' in html
    assert f'<a href="{memory}" id="guide-memory-link">What Parley knows about you</a>' in html
    assert f'<a class="sidebar-memory" href="{memory}">What Parley knows about you</a>' in html
    page = client.get(memory).content.decode()
    assert f'<a href="{memory}" title="What Parley knows about you" aria-current="page">' in page


def test_my_model_lists_what_it_knows_about_you(client, alice) -> None:
    services.memory_add(owner=alice, text="Call me Sam")
    paused = services.memory_add(owner=alice, text="Use metric units")
    services.memory_pause(memory=paused)
    client.force_login(alice)
    html = client.get(reverse("mymodel:index")).content.decode()
    section = html[html.index('id="my-memories"') : html.index('id="my-versions"')]
    assert "What it knows about you" in section
    assert "“Call me Sam” · in your answers now" in _text(section)
    assert "metric" not in section
    assert f'href="{reverse("memory:index")}"' in section


def test_the_export_carries_my_memories_with_their_revisions(client, alice, bob) -> None:
    memory = services.memory_add(owner=alice, text="Call me Sam")
    services.memory_edit(memory=memory, text="Call me Samuel")
    services.memory_delete(memory=Memory.objects.get(pk=memory.pk))
    services.memory_add(owner=bob, text="Call me Bob")
    client.force_login(alice)
    response = client.get(reverse("privacy:export"))
    lines = [json.loads(x) for x in b"".join(response.streaming_content).splitlines()]
    (record,) = [r for r in lines if r["type"] == "memory"]
    assert (record["id"], record["owner"], record["text"]) == (memory.pk, "alice", "Call me Samuel")
    assert (record["state"], record["source"], record["learnt_in"]) == ("deleted", "typed", None)
    assert [(r["text"], r["state"]) for r in record["revisions"]] == [
        ("Call me Sam", "active"),
        ("Call me Samuel", "active"),
        ("Call me Samuel", "deleted"),
    ]
    assert "Bob" not in json.dumps(lines)


def test_a_keys_switch_stops_giving_it_my_memories(client, alice, bob) -> None:
    services.memory_add(owner=alice, text="Call me Sam")
    key, secret = api_key_create(owner=alice, name="agent")
    assert [m.text for m in key_and_version_lookup(secret, "parley")[2]] == ["Call me Sam"]
    client.force_login(alice)
    url = reverse("api_key_memory", args=[key.pk])
    page = client.get(reverse("api_keys")).content.decode()
    assert f'hx-post="{url}"' in page and "Give my memories to this key's requests" in page
    assert re.search(rf'id="serves-memory-{key.pk}" checked', page)
    response = client.post(url, {})  # the box unticked
    assert response.status_code == 302 and response["Location"] == reverse("api_keys")
    assert ApiKey.objects.get(pk=key.pk).serves_memory is False
    assert key_and_version_lookup(secret, "parley")[2] == ()
    fragment = client.post(url, {"serves_memory": "on"}, **HTMX).content.decode()
    assert fragment.startswith('<form class="consent key-memory"')
    assert f'id="serves-memory-{key.pk}" checked' in fragment
    assert ApiKey.objects.get(pk=key.pk).serves_memory is True
    bobs, _ = api_key_create(owner=bob)
    assert client.post(reverse("api_key_memory", args=[bobs.pk]), {}).status_code == 404
    assert ApiKey.objects.get(pk=bobs.pk).serves_memory is True
