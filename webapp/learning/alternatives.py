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

The person may be waiting for them on the page ("Is one of them better?",
``webapp.learning.comparisons``), so their task goes to the front of the judge queue
(webapp/celery.py), and an ``AlternativesJob`` records where they stand: queued, being written,
written, or failed with the reason. Each change is pushed to the conversation's open pages,
which then ask for the comparison again.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import models, transaction
from django.template.loader import render_to_string
from django.utils import timezone

from trainer.claim import is_bare_dislike as bare_dislike
from webapp.chat.groups import conversation_group, fragment_event
from webapp.chat.models import Feedback, Message
from webapp.core.outbox import Task, enqueue
from webapp.inference import (
    ChoiceResult,
    CompletionAccumulator,
    ServingError,
    ServingUnavailable,
    stream_chat,
)
from webapp.learning.models import AlternativesJob, Judgement, Sample
from webapp.learning.secret_guard import tool_call_texts, turn_secret
from webapp.learning.selectors import lineage_key_for

log = logging.getLogger(__name__)

STALE_WRITING = timedelta(minutes=10)
"""A job still writing after this long lost its worker (the broker hands an unacknowledged task
out again only after its visibility timeout): it may be taken over."""


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


def prompt_job(message: Message) -> AlternativesJob | None:
    """The newest job for the answers to ``message``'s prompt: its own, or a disliked
    sibling's (the answers beside one are offered beside the other)."""
    return (
        AlternativesJob.objects.filter(
            disliked__conversation_id=message.conversation_id,
            disliked__parent_id=message.parent_id,
        )
        .order_by("-queued_at", "-id")
        .first()
    )


def alternatives_queue(*, sample: Sample) -> None:
    """After a bare 👎's sample is recorded, queue its alternatives: once per prompt, and again
    only after they could not be written."""
    if settings.DISLIKE_ALTERNATIVES <= 0 or not is_bare_dislike(sample):
        return
    job = prompt_job(sample.message)
    if job is not None and job.status != AlternativesJob.Status.FAILED:
        return
    if _has_alternatives(sample.message):
        return
    AlternativesJob.objects.update_or_create(
        disliked=sample.message,
        defaults={
            "sample": sample,
            "status": AlternativesJob.Status.QUEUED,
            "written": 0,
            "error": "",
            "queued_at": timezone.now(),
            "started_at": None,
            "finished_at": None,
        },
    )
    enqueue(Task.SAMPLE_ALTERNATIVES, sample.pk)
    _push(sample.message)


def alternatives_jobs_stalled(*, older_than: timedelta) -> list[int]:
    """The samples of jobs queued or being written for longer than ``older_than`` (their task
    was lost: the broker refused it, or its worker died): the sweep queues them again."""
    cutoff = timezone.now() - older_than
    return list(
        AlternativesJob.objects.filter(sample__isnull=False)
        .filter(
            models.Q(status=AlternativesJob.Status.QUEUED, queued_at__lt=cutoff)
            | models.Q(status=AlternativesJob.Status.WRITING, started_at__lt=cutoff)
        )
        .values_list("sample_id", flat=True)
    )


@transaction.atomic
def _job_start(sample: Sample) -> AlternativesJob | None:
    """The job of ``sample``'s 👎, marked as being written; None when they are written or
    another run is writing them."""
    now = timezone.now()
    job, _ = AlternativesJob.objects.select_for_update().get_or_create(
        disliked_id=sample.message_id, defaults={"sample": sample, "queued_at": now}
    )
    if job.status == AlternativesJob.Status.DONE:
        return None
    writing = job.status == AlternativesJob.Status.WRITING
    if writing and job.started_at is not None and job.started_at > now - STALE_WRITING:
        return None
    job.status, job.started_at, job.finished_at, job.error = (
        AlternativesJob.Status.WRITING,
        now,
        None,
        "",
    )
    job.save(update_fields=["status", "started_at", "finished_at", "error"])
    _push(sample.message)
    return job


def _job_end(job: AlternativesJob, *, written: int = 0, error: str = "") -> None:
    """Written (``written`` answers), or failed with the reason (``error``)."""
    job.status = AlternativesJob.Status.FAILED if error else AlternativesJob.Status.DONE
    job.written, job.error, job.finished_at = written, error[:300], timezone.now()
    job.save(update_fields=["status", "written", "error", "finished_at"])
    _push(job.disliked)


def _push(message: Message) -> None:
    """After commit, ask each open page of the conversation to show the comparison below every
    answer to this prompt that its owner gave a 👎 (it asks for the fragment itself)."""
    disliked = list(
        Feedback.objects.filter(
            message__conversation_id=message.conversation_id,
            message__parent_id=message.parent_id,
            message__turn_type=Message.TurnType.MAIN,
            author_id=models.F("message__conversation__owner_id"),
            rating=-1,
        ).values_list("message_id", flat=True)
    )
    if disliked:
        conversation_id = message.conversation_id
        transaction.on_commit(lambda: _send_refresh(conversation_id, disliked))


def _send_refresh(conversation_id: int, message_ids: list[int]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    html = "".join(
        render_to_string("chat/_compare_refresh.html", {"message_id": pk}) for pk in message_ids
    )
    try:
        async_to_sync(layer.group_send)(conversation_group(conversation_id), fragment_event(html))
    except Exception:  # the page asks again on its own: this only makes it sooner
        log.warning("could not tell the pages of conversation %s", conversation_id, exc_info=True)


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
    (not a bare 👎, already done, the sample gone) or the model cannot be reached. Its job
    says which."""
    sample = (
        Sample.objects.select_related("message__policy_version", "message__conversation")
        .filter(pk=sample_id)
        .first()
    )
    n = settings.DISLIKE_ALTERNATIVES
    if sample is None or n <= 0:
        return []
    job = _job_start(sample)
    if job is None:
        return []
    if not is_bare_dislike(sample):
        _job_end(job, error="the 👎 changed before they were written")
        return []
    if _has_alternatives(sample.message):
        _job_end(job, written=_alternatives_count(sample.message))
        return []
    try:
        accumulator = asyncio.run(_sample(sample, n))
    except ServingUnavailable as exc:
        log.warning("no alternatives to answer %s: %s", sample.message_id, exc)
        _job_end(job, error="the model server was not answering")
        return []
    except ServingError as exc:
        log.warning("no alternatives to answer %s: %s", sample.message_id, exc)
        _job_end(job, error=f"the model server refused the request: {exc.message}")
        return []
    except Exception:
        _job_end(job, error="something went wrong while writing them")
        raise
    results = [accumulator.choice(i) for i in range(n)]
    return alternatives_record(
        sample=sample, results=results, prompt_token_ids=accumulator.prompt_token_ids, job=job
    )


def _alternatives_count(message: Message) -> int:
    return Message.objects.filter(
        conversation_id=message.conversation_id,
        parent_id=message.parent_id,
        turn_type=Message.TurnType.UNSEEN,
    ).count()


@transaction.atomic
def alternatives_record(
    *,
    sample: Sample,
    results: list[ChoiceResult],
    prompt_token_ids: list[int] | None,
    job: AlternativesJob | None = None,
) -> list[Message]:
    """Each sampled answer as a hidden sibling of the disliked one, with its sample in the
    disliked answer's group (reward 0). Answers with no tokens are left out. ``job`` ends
    with them: done, or failed when none had tokens."""
    disliked = Message.objects.select_for_update().get(pk=sample.message_id)
    if _has_alternatives(disliked):  # a redelivered task
        if job is not None:
            _job_end(job, written=_alternatives_count(disliked))
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
        # The context was read when the disliked answer's sample was made (a secret there
        # queues no alternatives): what is new is what the model wrote.
        secret = turn_secret(
            prompt_messages=[],
            texts={
                "the answer": result.content,
                "the answer's reasoning": result.reasoning,
                "the answer's tool calls": "\n".join(tool_call_texts(result.tool_calls)),
            },
        )
        Sample.objects.create(
            message=answer,
            judgement=judgement,
            kind=Sample.Kind.RL,
            reward=0.0,
            status=Sample.Status.EXCLUDED if secret else Sample.Status.READY,
            exclusion_reason=secret or "",
            prompt_messages=sample.prompt_messages,
            prompt_token_ids=answer.prompt_token_ids or [],
            response_token_ids=result.token_ids,
            response_logprobs=result.token_logprobs,
            group_key=sample.group_key,
            policy_version=disliked.policy_version,
        )
        recorded.append(answer)
    if job is not None:
        _job_end(job, written=len(recorded), error="" if recorded else "the model wrote nothing")
    return recorded
