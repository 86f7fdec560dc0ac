"""Editing a sent user message on real PostgreSQL: a new branch, and nothing lost."""

from __future__ import annotations

import pytest

from tests.webapp.chat.conftest import answer
from webapp.chat import selectors, services
from webapp.chat.edits import user_message_edit
from webapp.chat.models import Message

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_an_edit_is_a_selected_sibling_and_the_old_branch_stays(chat) -> None:
    conversation, question, reply = chat
    follow_up = services.user_message_send(conversation=conversation, content="And 3+3?")
    later = answer(conversation, follow_up, "6.")

    edited = user_message_edit(message=follow_up, content="And 3*3?")

    assert (edited.parent, edited.conversation, edited.role) == (reply, conversation, "user")
    assert (edited.turn_type, edited.content) == ("main", "And 3*3?")
    entries = selectors.transcript(conversation=conversation)
    assert [e.message for e in entries] == [question, reply, edited]
    assert (entries[-1].sibling_index, entries[-1].sibling_count) == (2, 2)
    assert entries[-1].previous_sibling == follow_up.pk
    follow_up.refresh_from_db()
    later.refresh_from_db()
    assert (follow_up.content, follow_up.selected) == ("And 3+3?", False)
    assert (later.parent, later.content, later.selected) == (follow_up, "6.", True)

    services.message_select(message=follow_up)
    entries = selectors.transcript(conversation=conversation)
    assert [e.message for e in entries] == [question, reply, follow_up, later]


def test_the_answer_to_the_edited_message_takes_the_edit_as_its_next_state(chat) -> None:
    conversation, question, reply = chat

    edited = user_message_edit(message=question, content="What is 2+2, in words?")

    reply.refresh_from_db()
    assert reply.next_state == edited
    assert edited.parent is None and not Message.objects.get(pk=question.pk).selected
    assert [e.message for e in selectors.transcript(conversation=conversation)] == [edited]


def test_a_failed_answer_or_one_with_a_reply_already_keeps_no_new_next_state(chat) -> None:
    conversation, question, reply = chat
    follow_up = services.user_message_send(conversation=conversation, content="And 3+3?")
    failed = answer(conversation, follow_up, "", status=Message.Status.FAILED)

    user_message_edit(message=follow_up, content="And 3*3?")
    user_message_edit(message=question, content="What is 2*2?")

    failed.refresh_from_db()
    reply.refresh_from_db()
    assert failed.next_state is None
    assert reply.next_state == follow_up


def test_editing_the_first_message_retitles_only_a_title_it_gave(alice) -> None:
    named = services.conversation_start(owner=alice, content="Plan a trip to Lisbon")
    renamed = services.conversation_start(owner=alice, content="Plan a trip to Porto")
    services.conversation_rename(conversation=renamed, title="Holidays")

    for conversation in (named, renamed):
        first = conversation.messages.get()
        user_message_edit(message=first, content="Plan a  trip to Madrid")
        conversation.refresh_from_db()

    assert (named.title, renamed.title) == ("Plan a trip to Madrid", "Holidays")


def test_only_a_user_message_can_be_edited(chat) -> None:
    _, _, reply = chat
    with pytest.raises(ValueError):
        user_message_edit(message=reply, content="Five.")
