"""The chat services on real PostgreSQL: the only writers of conversations and feedback."""

from __future__ import annotations

import pytest

from tests.webapp.chat.conftest import answer
from webapp.chat import selectors, services
from webapp.chat.feedback import feedback_rate, feedback_set, feedback_toggle_tag
from webapp.chat.feedback_spec import FeedbackInvalid
from webapp.chat.models import Conversation, Feedback, Message

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_first_user_message_titles_the_conversation(alice) -> None:
    conversation = services.conversation_create(owner=alice)
    services.user_message_send(conversation=conversation, content="  Plan a   trip to Lisbon  ")
    conversation.refresh_from_db()
    assert conversation.title == "Plan a trip to Lisbon"


def test_user_message_follows_the_transcript_and_is_the_answers_next_state(chat) -> None:
    conversation, _, reply = chat
    follow_up = services.user_message_send(conversation=conversation, content="And 3+3?")
    reply.refresh_from_db()
    assert follow_up.parent == reply
    assert follow_up.turn_index == reply.turn_index + 1
    assert reply.next_state == follow_up


def test_a_failed_answer_gets_no_next_state_and_stays_out_of_the_prompt(alice) -> None:
    conversation = services.conversation_create(owner=alice)
    question = services.user_message_send(conversation=conversation, content="Hello?")
    failed = answer(conversation, question, "", status=Message.Status.FAILED)
    again = services.user_message_send(conversation=conversation, content="Hello again?")
    failed.refresh_from_db()
    assert failed.next_state is None
    prompt = selectors.prompt_messages(message=again)
    assert prompt == [
        {"role": "user", "content": "Hello?"},
        {"role": "user", "content": "Hello again?"},
    ]


def test_conversation_start_with_text_stores_the_message(alice) -> None:
    conversation = services.conversation_start(owner=alice, content="Hi there")
    assert [m.content for m in conversation.messages.all()] == ["Hi there"]


def test_conversation_start_without_text_reuses_an_empty_conversation(alice) -> None:
    first = services.conversation_start(owner=alice)
    second = services.conversation_start(owner=alice)
    assert first == second
    services.user_message_send(conversation=first, content="now it has a message")
    assert services.conversation_start(owner=alice) != first


def test_regenerated_answer_is_a_selected_sibling(chat) -> None:
    conversation, question, reply = chat
    sibling = answer(conversation, question, "Four.")
    reply.refresh_from_db()
    assert sibling.parent == reply.parent == question
    assert sibling.selected and not reply.selected
    entries = selectors.transcript(conversation=conversation)
    assert [(e.message, e.sibling_index, e.sibling_count) for e in entries] == [
        (question, 1, 1),
        (sibling, 2, 2),
    ]


def test_message_select_moves_between_siblings(chat) -> None:
    conversation, question, reply = chat
    sibling = answer(conversation, question, "Four.")
    services.message_select(message=reply)
    entries = selectors.transcript(conversation=conversation)
    assert entries[-1].message == reply
    assert (entries[-1].sibling_index, entries[-1].next_sibling) == (1, sibling.pk)


def test_answer_keeps_the_sampled_tokens_and_version(chat) -> None:
    _, _, reply = chat
    reply.refresh_from_db()
    assert reply.token_ids == [1, 2] and reply.token_logprobs == [-0.1, -0.2]
    assert reply.prompt_token_ids == [5, 6, 7]
    assert reply.policy_version.label == "v0"
    assert reply.status == Message.Status.COMPLETE


def test_rating_can_be_changed_and_withdrawn_and_history_is_kept(chat, alice) -> None:
    _, _, reply = chat
    feedback_rate(message=reply, author=alice, rating=1)
    feedback_toggle_tag(message=reply, author=alice, tag="accurate")
    feedback_rate(message=reply, author=alice, rating=-1)
    feedback = Feedback.objects.get(message=reply, author=alice)
    assert feedback.rating == -1
    assert feedback.tags == []  # 👍 reasons do not survive a change to 👎
    feedback_rate(message=reply, author=alice, rating=0)
    feedback.refresh_from_db()
    assert feedback.rating == 0
    assert [state["rating"] for state in feedback.history] == [1, 1, -1]


def test_toggling_a_tag_adds_then_removes_it(chat, alice) -> None:
    _, _, reply = chat
    feedback_toggle_tag(message=reply, author=alice, tag="too long")
    feedback = Feedback.objects.get(message=reply, author=alice)
    assert (feedback.rating, feedback.tags) == (-1, ["too long"])
    feedback_toggle_tag(message=reply, author=alice, tag="too long")
    feedback.refresh_from_db()
    assert feedback.tags == []


def test_a_tag_of_the_other_thumb_is_refused(chat, alice) -> None:
    _, _, reply = chat
    feedback_rate(message=reply, author=alice, rating=1)
    with pytest.raises(FeedbackInvalid):
        feedback_toggle_tag(message=reply, author=alice, tag="too long")


def test_comment_and_correction_are_kept_beside_the_rating(chat, alice) -> None:
    _, _, reply = chat
    feedback_rate(message=reply, author=alice, rating=-1)
    feedback_set(message=reply, author=alice, comment=" Too terse. ")
    feedback_set(message=reply, author=alice, correction="2 + 2 = 4, because …")
    feedback = Feedback.objects.get(message=reply, author=alice)
    assert (feedback.rating, feedback.comment, feedback.correction) == (
        -1,
        "Too terse.",
        "2 + 2 = 4, because …",
    )


def test_feedback_on_a_user_message_is_refused(chat, alice) -> None:
    _, question, _ = chat
    with pytest.raises(FeedbackInvalid):
        feedback_rate(message=question, author=alice, rating=1)


def test_deleting_a_conversation_deletes_its_messages(chat) -> None:
    conversation, _, _ = chat
    services.conversation_delete(conversation=conversation)
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()
