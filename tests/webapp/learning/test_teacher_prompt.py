"""The OPD teacher's prompt is the student's prompt plus the hint, nothing else."""

from __future__ import annotations

import pytest

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory
from tests.trainer.tiny import CHAT_TEMPLATE, byte_tokenizer
from trainer.batch import HINT_PREFIX, chat_prompt_ids, hinted_prompt_ids, trainer_sample
from webapp.chat.models import Message
from webapp.learning.services import judgement_record, message_evidence
from webapp.learning.workflows import training

pytestmark = [pytest.mark.django_db, pytest.mark.services]

TOOLS = [
    {
        "type": "function",
        "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
    }
]
HINT = "Answer in one word."


@pytest.fixture
def tokenizer():
    tokenizer = byte_tokenizer()
    # Tools are rendered into the prompt, as real chat templates do.
    tokenizer.chat_template = (
        "{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
        + CHAT_TEMPLATE
    )
    return tokenizer


def test_the_teacher_sees_the_served_prompt_with_tools_and_without_the_failed_answer(
    tokenizer, monkeypatch
) -> None:
    monkeypatch.setattr("webapp.core.outbox.send", lambda task, args: None)
    conversation = ConversationFactory(train_consent=True)
    first = QuestionFactory(conversation=conversation, content="Hello there")
    AnswerFactory(parent=first, status=Message.Status.FAILED, content="", token_ids=None)
    second = QuestionFactory(conversation=conversation, content="Weather in Paris?")
    assert second.parent.status == Message.Status.FAILED  # the failed answer is on the path
    # What the API sent to vLLM: the tools, and no failed answer (the client never had one).
    served = [
        {"role": "user", "content": "Hello there"},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    prompt_ids = chat_prompt_ids(tokenizer, served, TOOLS)
    answer_ids = tokenizer("Sunny", add_special_tokens=False)["input_ids"]
    answer = AnswerFactory(
        parent=second,
        content="Sunny",
        prompt_token_ids=prompt_ids,
        token_ids=answer_ids,
        token_logprobs=[-1.0] * len(answer_ids),
        sampling_params={"temperature": 0.7, "tools": TOOLS},
    )
    evidence = message_evidence(message=answer)
    assert evidence.prompt_messages == served
    judgement = judgement_record(
        evidence=evidence,
        source="prm",
        votes=[],
        score=1,
        hint=HINT,
        hint_votes=[],
        judge_model="base",
        prompt_version="t",
        seconds=0.0,
    )
    (row,) = training.sample_rows([judgement.sample.pk])
    assert row.tools == TOOLS and row.temperature == 0.7
    teacher_ids = trainer_sample(tokenizer, **vars(row)).teacher_prompt_token_ids
    teacher = tokenizer.decode(teacher_ids)
    assert HINT_PREFIX + HINT in teacher
    assert teacher.replace(HINT_PREFIX + HINT, "") == tokenizer.decode(prompt_ids)


def test_the_served_prompt_wins_over_stored_messages_that_differ(tokenizer) -> None:
    # An agent rewrote its system prompt: the stored one is older than the one served.
    stored = [{"role": "system", "content": "Today is Monday."}, {"role": "user", "content": "Hi"}]
    served = [{"role": "system", "content": "Today is Friday."}, {"role": "user", "content": "Hi"}]
    served_ids = chat_prompt_ids(tokenizer, served)
    teacher = tokenizer.decode(
        hinted_prompt_ids(tokenizer, stored, HINT, served_prompt_ids=served_ids)
    )
    assert teacher.replace(HINT_PREFIX + HINT, "") == tokenizer.decode(served_ids)
    # Without the served prompt, the stored messages are all there is.
    alone = tokenizer.decode(hinted_prompt_ids(tokenizer, stored, HINT))
    assert "Monday" in alone and alone.endswith(
        "Hi" + HINT_PREFIX + HINT + "<|im_end|>\n<|im_start|>assistant\n"
    )
