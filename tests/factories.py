"""factory_boy factories for the domain: users, conversations, answers, feedback, samples.

Answers are made through the chat services (start, then finish), as the consumer and the API
record them, so an answer from here has what a real one has: the live version, sampled tokens.
"""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from webapp.chat import services
from webapp.chat.models import Conversation, Feedback, Message
from webapp.inference import ChoiceResult
from webapp.learning.models import Judgement, Sample
from webapp.learning.selectors import policy_version_live

PASSWORD = "correct-horse-4242"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")
    password = PASSWORD

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Any:
        return model_class.objects.create_user(*args, **kwargs)


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    owner = factory.SubFactory(UserFactory)
    title = ""


class QuestionFactory(factory.Factory):
    """The user's next message in a conversation, sent as the chat page sends it."""

    class Meta:
        model = Message

    conversation = factory.SubFactory(ConversationFactory)
    content = "What is 2+2?"

    @classmethod
    def _create(cls, model_class: type[Message], **kwargs: Any) -> Message:
        return services.user_message_send(**kwargs)


class AnswerFactory(factory.Factory):
    """A finished assistant answer to ``parent`` (a new question when none is given)."""

    class Meta:
        model = Message

    parent = factory.SubFactory(QuestionFactory)
    content = "An answer."
    status = Message.Status.COMPLETE
    token_ids = factory.LazyFunction(lambda: [1, 2])
    token_logprobs = factory.LazyFunction(lambda: [-0.1, -0.2])
    prompt_token_ids = factory.LazyFunction(lambda: [5, 6, 7])
    usage = factory.LazyFunction(lambda: {"prompt_tokens": 3, "completion_tokens": 2})
    sampling_params = factory.LazyFunction(lambda: {"max_tokens": 8, "temperature": 0.7})
    tool_calls = factory.LazyFunction(list)
    completion_id = None
    served_model = None
    policy_version = None  # the live version
    turn_type = Message.TurnType.MAIN
    memories = factory.LazyFunction(list)

    @classmethod
    def _create(cls, model_class: type[Message], **kw: Any) -> Message:
        version = kw["policy_version"] or policy_version_live()
        parent: Message = kw["parent"]
        message = services.assistant_message_start(
            conversation=parent.conversation,
            parent=parent,
            policy_version=version,
            served_model=kw["served_model"] or version.served_name("parley"),
            sampling_params=kw["sampling_params"],
            turn_type=kw["turn_type"],
            memories=kw["memories"],
        )
        return services.assistant_message_finish(
            message=message,
            result=ChoiceResult(
                content=kw["content"],
                tool_calls=kw["tool_calls"],
                token_ids=kw["token_ids"],
                token_logprobs=kw["token_logprobs"],
            ),
            prompt_token_ids=kw["prompt_token_ids"],
            usage=kw["usage"],
            completion_id=kw["completion_id"],
            status=kw["status"],
        )


class FeedbackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Feedback

    message = factory.SubFactory(AnswerFactory)
    author = factory.LazyAttribute(lambda o: o.message.conversation.owner)
    rating = 1


class JudgementFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Judgement

    message = factory.SubFactory(AnswerFactory)
    fingerprint = "f"
    source = "prm"
    score = 1
    votes = factory.LazyFunction(
        lambda: [
            {"score": 1, "text": "The answer is right. \\boxed{1}"},
            {"score": -1, "text": "Too terse. \\boxed{-1}"},
            {"score": 1, "text": "Correct. \\boxed{1}"},
        ]
    )
    hint = "Show the working."
    hint_votes = factory.LazyFunction(lambda: ["[HINT_START]Show the working.[HINT_END]"])
    judge_model = "base"
    prompt_version = "prm-1"


class SampleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Sample

    judgement = factory.SubFactory(JudgementFactory)
    message = factory.LazyAttribute(lambda o: o.judgement.message)
    kind = "combined"
    reward = factory.LazyAttribute(lambda o: float(o.judgement.score))
    hint = factory.LazyAttribute(lambda o: o.judgement.hint)
    prompt_messages = factory.LazyFunction(lambda: [{"role": "user", "content": "What is 2+2?"}])
    prompt_token_ids = factory.LazyFunction(lambda: [1, 2, 3])
    response_token_ids = factory.LazyFunction(lambda: [4, 5])
    response_logprobs = factory.LazyFunction(lambda: [-0.1, -0.2])
    policy_version = factory.LazyAttribute(lambda o: o.message.policy_version)
    status = "ready"
    update = None
    consumed_at = factory.LazyAttribute(lambda o: timezone.now() if o.update else None)


def feedback_samples(owner: Any, count: int) -> list[Sample]:
    """``count`` ready RL samples of ``owner``'s answers, liked and disliked in turn, with token
    ids the real model reads (for workers that train the real model)."""
    samples = []
    for i in range(count):
        answer = AnswerFactory(parent__conversation__owner=owner, parent__content=f"Question {i}?")
        judgement = Judgement.objects.create(
            message=answer, fingerprint="f", source="feedback", score=1
        )
        samples.append(
            Sample.objects.create(
                message=answer,
                judgement=judgement,
                kind="rl",
                reward=1.0 if i % 2 else -1.0,
                prompt_token_ids=[1, 9690, 198, 504, 30],
                response_token_ids=[20, 21, 22],
                response_logprobs=[-1.0, -1.5, -0.5],
                prompt_messages=[{"role": "user", "content": "q"}],
                policy_version=policy_version_live(),
            )
        )
    return samples
