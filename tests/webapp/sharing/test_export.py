"""One conversation as a download: Markdown and JSON hold what its owner sees on the chat page,
with roles and times (and, in JSON, the owner's feedback); anyone else gets a 404."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.factories import ConversationFactory
from webapp.chat.models import Conversation
from webapp.chat.services import message_select

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def _export(client, conversation: Conversation, extension: str):
    name = "sharing:export_markdown" if extension == "md" else "sharing:export_json"
    return client.get(reverse(name, args=[conversation.pk]))


def test_markdown_export_is_a_download_named_for_the_title(client, alice, trip) -> None:
    client.force_login(alice)
    response = _export(client, trip.conversation, "md")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert response["Content-Disposition"] == 'attachment; filename="parley-lunch-in-lisbon.md"'


def test_markdown_export_reads_as_the_page_with_who_wrote_what_and_when(
    client, alice, trip
) -> None:
    client.force_login(alice)
    text = _export(client, trip.conversation, "md").content.decode()
    assert text.startswith("# Lunch in Lisbon\n")
    when = trip.question.created_at.strftime("%Y-%m-%d %H:%M")
    assert f"## You · {when} UTC\n\nWhere should I eat in Lisbon?" in text
    assert "## Parley · " in text and "Try the **Time Out Market**." in text
    assert text.index("Where should I eat") < text.index("Time Out") < text.index("dessert")
    # The regenerated answer the page does not show is not in the file either.
    assert "Anywhere at all" not in text
    assert "My secret diary" not in text


def test_json_export_holds_the_shown_path_with_roles_times_and_the_owners_feedback(
    client, alice, trip
) -> None:
    client.force_login(alice)
    response = _export(client, trip.conversation, "json")
    assert response["Content-Disposition"] == 'attachment; filename="parley-lunch-in-lisbon.json"'
    document = json.loads(response.content)
    assert document["title"] == "Lunch in Lisbon"
    messages = document["messages"]
    assert [(m["id"], m["role"]) for m in messages] == [
        (trip.question.pk, "user"),
        (trip.answer.pk, "assistant"),
        (trip.follow_up.pk, "user"),
    ]
    assert messages[0]["created_at"] == trip.question.created_at.isoformat()
    assert messages[1]["feedback"] == {
        "rating": 1,
        "comment": "Useful, thanks",
        "correction": "Try the Time Out Market, or Cervejaria Ramiro.",
        "tags": [],
    }
    assert "feedback" not in messages[0]  # a person's own message takes no feedback


def test_an_answer_without_feedback_exports_none(client, alice, trip) -> None:
    message_select(message=trip.replaced)  # the first answer shown again: nobody rated it
    client.force_login(alice)
    messages = json.loads(_export(client, trip.conversation, "json").content)["messages"]
    assert [m["content"] for m in messages] == [
        "Where should I eat in Lisbon?",
        "Anywhere at all, really.",
    ]
    assert messages[1]["feedback"] is None


def test_an_untitled_conversation_is_named_by_its_id_and_a_title_is_made_safe(
    client, alice
) -> None:
    client.force_login(alice)
    untitled = ConversationFactory(owner=alice, title="")
    named = ConversationFactory(owner=alice, title='Über "quotes"/slashes\\ & all')
    assert _export(client, untitled, "md")["Content-Disposition"] == (
        f'attachment; filename="parley-conversation-{untitled.pk}.md"'
    )
    assert _export(client, named, "json")["Content-Disposition"] == (
        'attachment; filename="parley-uber-quotesslashes-all.json"'
    )


def test_another_persons_conversation_is_not_found_in_either_format(client, bob, trip) -> None:
    client.force_login(bob)
    assert _export(client, trip.conversation, "md").status_code == 404
    assert _export(client, trip.conversation, "json").status_code == 404


def test_export_needs_a_login(client, trip) -> None:
    response = _export(client, trip.conversation, "md")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
