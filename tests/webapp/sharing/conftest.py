"""Alice's conversation for the sharing tests: a question answered twice (the second answer
shown, the first kept beside it as the page keeps it), her feedback on the shown answer, and a
follow-up; and another conversation of hers whose title must never show on a shared page."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory
from webapp.chat.feedback import feedback_set
from webapp.chat.models import Conversation, Message


@dataclass
class Trip:
    conversation: Conversation
    question: Message
    replaced: Message  # the first answer, regenerated: not on the page
    answer: Message  # the answer the page shows, with alice's feedback
    follow_up: Message
    other: Conversation  # another of alice's conversations


@pytest.fixture
def trip(alice, recorded_tasks) -> Trip:
    conversation = ConversationFactory(owner=alice, title="Lunch in Lisbon")
    question = QuestionFactory(conversation=conversation, content="Where should I eat in Lisbon?")
    replaced = AnswerFactory(parent=question, content="Anywhere at all, really.")
    answer = AnswerFactory(parent=question, content="Try the **Time Out Market**.")
    feedback_set(
        message=answer,
        author=alice,
        rating=1,
        comment="Useful, thanks",
        correction="Try the Time Out Market, or Cervejaria Ramiro.",
    )
    follow_up = QuestionFactory(conversation=conversation, content="And for dessert?")
    other = ConversationFactory(owner=alice, title="My secret diary")
    QuestionFactory(conversation=other, content="Dear diary")
    return Trip(conversation, question, replaced, answer, follow_up, other)
