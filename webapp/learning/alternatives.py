"""A bare 👎 becomes a group: answers the user never saw, sampled beside the one they disliked.

A 👎 with no words says the answer missed, not what would have hit; on its own, with the
batch's mean as the baseline, a batch of 👎 teaches nothing (every advantage is 0), and pushed
down alone it empties answers. So the version that wrote the disliked answer writes
``PARLEY_DISLIKE_ALTERNATIVES`` more to the same prompt, in the background. They are recorded
as hidden siblings (turn type ``unseen``: the transcript never shows them), each a sample with
reward 0 in the disliked answer's group (``group_key``, its prompt). The update's group
advantage then takes the disliked answer down and the others up by the same total: the model
moves away from what was disliked, toward whole answers it could have given instead. The claim
keeps a group in one batch (``trainer.claim``).
"""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings
from django.db import transaction

from trainer.claim import is_bare_dislike as bare_dislike
from webapp.chat.models import Message
from webapp.core.outbox import Task, enqueue
from webapp.inference import (
    ChoiceResult,
    CompletionAccumulator,
    ServingError,
    ServingUnavailable,
    stream_chat,
)
from webapp.learning.models import Judgement, Sample
from webapp.learning.selectors import lineage_key_for

log = logging.getLogger(__name__)


def unseen_fingerprint(disliked_id: int) -> str:
    """The evidence an unseen answer is judged on: the 👎 it was sampled beside."""
    return f"unseen beside {disliked_id}"


def chosen_fingerprint(disliked_id: int) -> str:
    """The evidence an unseen answer the person chose is judged on: the comparison with the
    one they disliked (``webapp.learning.comparisons``)."""
    return f"chosen over {disliked_id}"


def alternative_params(message: Message, n: int) -> dict[str, float | int]:
    """How the answers beside ``message`` are sampled, stored on each so it is trained at the
    temperature it was drawn at: the disliked request's length and temperature, the chat's
    temperature where that request was greedy or gave none (n greedy answers would be one).

    >>> alternative_params(Message(sampling_params={"temperature": 0.9, "max_tokens": 50}), 3)
    {'max_tokens': 50, 'temperature': 0.9, 'n': 3}
    """
    params = message.sampling_params
    temperature = params.get("temperature")
    if not (isinstance(temperature, int | float) and temperature > 0):
        temperature = settings.CHAT_TEMPERATURE
    max_tokens = params.get("max_tokens")
    if not (isinstance(max_tokens, int) and max_tokens > 0):
        max_tokens = settings.CHAT_MAX_TOKENS
    return {"max_tokens": max_tokens, "temperature": float(temperature), "n": n}


def is_bare_dislike(sample: Sample) -> bool:
    """A 👎 (or a −1 verdict) on a main answer with nothing said: no hint, no correction."""
    return sample.message.turn_type == Message.TurnType.MAIN and bare_dislike(
        reward=sample.reward, hint=sample.hint, correction=sample.correction
    )


def _has_alternatives(message: Message) -> bool:
    return Message.objects.filter(
        conversation_id=message.conversation_id,
        parent_id=message.parent_id,
        turn_type=Message.TurnType.UNSEEN,
    ).exists()


def alternatives_queue(*, sample: Sample) -> None:
    """After a bare 👎's sample is recorded, queue its alternatives (once per prompt)."""
    if settings.DISLIKE_ALTERNATIVES > 0 and is_bare_dislike(sample):
        enqueue(Task.SAMPLE_ALTERNATIVES, sample.pk)


async def _sample(sample: Sample, n: int) -> CompletionAccumulator:
    message = sample.message
    version = message.policy_version
    params = alternative_params(message, n)
    accumulator = CompletionAccumulator()
    stream = stream_chat(
        sample.prompt_messages,
        model=message.served_model or "base",
        params=params,
        adapter_path=version.adapter_path if version is not None else "",
        lineage=lineage_key_for(user=message.conversation.owner_id),
    )
    async for chunk in stream:
        accumulator.add(chunk)
    return accumulator


def alternatives_sample(*, sample_id: int) -> list[Message]:
    """Write the alternatives of a bare 👎's answer and record them; [] when it needs none
    (not a bare 👎, already done, the sample gone) or the model cannot be reached."""
    sample = (
        Sample.objects.select_related("message__policy_version", "message__conversation")
        .filter(pk=sample_id)
        .first()
    )
    n = settings.DISLIKE_ALTERNATIVES
    if sample is None or n <= 0 or not is_bare_dislike(sample):
        return []
    if _has_alternatives(sample.message):
        return []
    try:
        accumulator = asyncio.run(_sample(sample, n))
    except (ServingError, ServingUnavailable) as exc:
        log.warning("no alternatives to answer %s: %s", sample.message_id, exc)
        return []
    results = [accumulator.choice(i) for i in range(n)]
    return alternatives_record(
        sample=sample, results=results, prompt_token_ids=accumulator.prompt_token_ids
    )


@transaction.atomic
def alternatives_record(
    *, sample: Sample, results: list[ChoiceResult], prompt_token_ids: list[int] | None
) -> list[Message]:
    """Each sampled answer as a hidden sibling of the disliked one, with its sample in the
    disliked answer's group (reward 0). Answers with no tokens are left out."""
    disliked = Message.objects.select_for_update().get(pk=sample.message_id)
    if _has_alternatives(disliked):  # a redelivered task
        return []
    recorded = []
    for result in results:
        if not result.token_ids or len(result.token_logprobs) != len(result.token_ids):
            continue
        answer = Message.objects.create(
            conversation_id=disliked.conversation_id,
            parent_id=disliked.parent_id,
            role=Message.Role.ASSISTANT,
            turn_type=Message.TurnType.UNSEEN,
            selected=False,
            content=result.content,
            token_ids=result.token_ids,
            token_logprobs=result.token_logprobs,
            prompt_token_ids=prompt_token_ids or disliked.prompt_token_ids,
            policy_version=disliked.policy_version,
            served_model=disliked.served_model,
            sampling_params={**alternative_params(disliked, len(results)), "beside": disliked.pk},
            finish_reason=result.finish_reason or "",
        )
        judgement = Judgement.objects.create(
            message=answer,
            fingerprint=unseen_fingerprint(disliked.pk),
            source=Judgement.Source.UNSEEN,
            score=0,
            prompt_version="alternatives-v1",
        )
        Sample.objects.create(
            message=answer,
            judgement=judgement,
            kind=Sample.Kind.RL,
            reward=0.0,
            prompt_messages=sample.prompt_messages,
            prompt_token_ids=answer.prompt_token_ids or [],
            response_token_ids=result.token_ids,
            response_logprobs=result.token_logprobs,
            group_key=sample.group_key,
            policy_version=disliked.policy_version,
        )
        recorded.append(answer)
    return recorded
