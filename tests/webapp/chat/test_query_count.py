"""The chat page costs a fixed number of queries, however long the conversation."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import (
    AnswerFactory,
    ConversationFactory,
    FeedbackFactory,
    QuestionFactory,
    SampleFactory,
)

pytestmark = [pytest.mark.django_db]

ANSWERS = 50
# session, user, conversation, the answer being written, transcript, feedback, status (3),
# memory proposals, the conversation list
MAX_QUERIES = 11


def test_the_chat_page_with_50_judged_answers_runs_a_fixed_number_of_queries(
    client, alice, django_assert_max_num_queries
) -> None:
    conversation = ConversationFactory(owner=alice, title="Long")
    for index in range(ANSWERS):
        question = QuestionFactory(conversation=conversation, content=f"Question {index}")
        answer = AnswerFactory(parent=question, content=f"Answer {index}")
        if index % 2:
            FeedbackFactory(message=answer, author=alice, rating=-1, comment="Shorter, please.")
        SampleFactory(
            judgement__message=answer,
            judgement__score=1 - 2 * (index % 2),
            # a rating is the user's; the other answers were judged from their next message
            judgement__source="feedback" if index % 2 else "prm",
        )
    client.force_login(alice)
    url = reverse("chat:conversation", args=[conversation.pk])

    with django_assert_max_num_queries(MAX_QUERIES):
        page = client.get(url).content.decode()

    assert page.count('title="judged +1 from your next message · hint taken"') == ANSWERS // 2
    assert page.count('title="judged -1 · hint taken"') == ANSWERS // 2
    assert page.count(">Will be learnt in the next update<") == ANSWERS // 2
    assert page.count(
        ">Read from your next message: good · will be learnt in the next update<"
    ) == (ANSWERS // 2)
