"""Reads are scoped to their owner; search, transcript entries and prompts."""

from __future__ import annotations

import pytest
from django.http import Http404

from tests.webapp.chat.conftest import answer
from webapp.chat import selectors, services
from webapp.chat.feedback import feedback_rate

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_another_users_conversation_and_message_are_not_found(chat, bob) -> None:
    conversation, _, reply = chat
    with pytest.raises(Http404):
        selectors.conversation_get_for_user(user=bob, pk=conversation.pk)
    with pytest.raises(Http404):
        selectors.message_get_for_user(user=bob, pk=reply.pk)
    assert list(selectors.conversation_list_for_user(user=bob)) == []


def test_api_conversations_are_listed_with_the_owners_others(alice) -> None:
    api = services.conversation_create(owner=alice, title="From OpenClaw", source="api")
    web = services.conversation_create(owner=alice, title="From the browser")
    assert set(selectors.conversation_list_for_user(user=alice)) == {api, web}


def test_transcript_entry_matches_the_transcript(chat, alice) -> None:
    conversation, question, reply = chat
    sibling = answer(conversation, question, "Four.")
    feedback_rate(message=sibling, author=alice, rating=1)
    entry = selectors.transcript_entry(message=sibling, viewer=alice)
    assert entry == selectors.transcript(conversation=conversation, viewer=alice)[-1]
    assert (entry.sibling_index, entry.sibling_count, entry.previous_sibling) == (2, 2, reply.pk)
    assert entry.feedback.rating == 1


def test_prompt_is_the_selected_path_up_to_the_message(chat) -> None:
    conversation, _, _ = chat
    follow_up = services.user_message_send(conversation=conversation, content="And 3+3?")
    assert selectors.prompt_messages(message=follow_up) == [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "It is **4**."},
        {"role": "user", "content": "And 3+3?"},
    ]
