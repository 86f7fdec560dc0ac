"""The next-state rule is one rule: the chat page and /v1 link (or do not link) the same way."""

from __future__ import annotations

import pytest

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory
from webapp.api.keys import api_key_create
from webapp.api.sessions import api_turn_record
from webapp.chat import services
from webapp.chat.models import Conversation, Message

pytestmark = [pytest.mark.django_db]


def _web_reply(conversation: Conversation, key) -> Message:
    return services.user_message_send(conversation=conversation, content="And 3+3?")


def _api_reply(conversation: Conversation, key) -> Message:
    sent = [
        {"role": m.role, "content": m.content} for m in conversation.messages.order_by("turn_index")
    ]
    turn = api_turn_record(
        key=key, session_id="s1", messages=[*sent, {"role": "user", "content": "And 3+3?"}]
    )
    return turn.new_messages[0]


@pytest.mark.parametrize("reply", [_web_reply, _api_reply], ids=["page", "api"])
@pytest.mark.parametrize(
    ("answer_change", "linked"),
    [({}, True), ({"status": "failed"}, False), ({"turn_type": "side"}, False)],
    ids=["given", "failed", "side"],
)
def test_a_reply_is_the_next_state_only_of_a_given_main_answer(
    alice, reply, answer_change, linked
) -> None:
    key = api_key_create(owner=alice, name="t")[0]
    conversation = ConversationFactory(
        owner=alice, source="api", external_session_id="s1", api_key=key
    )
    answer = AnswerFactory(parent=QuestionFactory(conversation=conversation), content="4")
    Message.objects.filter(pk=answer.pk).update(**answer_change)
    answer.refresh_from_db()

    next_message = reply(conversation, key)

    assert next_message.parent_id == answer.pk
    answer.refresh_from_db()
    assert (answer.next_state_id == next_message.pk) is linked
    assert services.takes_next_state(answer) is linked
