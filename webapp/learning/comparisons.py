"""Which is better? A person compares the answers sampled beside one they disliked.

A bare 👎 says an answer missed, not what would have hit. The version that wrote it writes
``PARLEY_DISLIKE_ALTERNATIVES`` more answers to the same prompt in the background
(``webapp.learning.alternatives``); the answer then offers them, below its 👎: "Is one of them
better?".
An answer the person chooses gets a judgement of its own (source ``chosen``, +1) and a +1
sample in the disliked answer's group, so the update's group advantage (GRPO) moves the model
from the disliked answer toward the chosen one: a preference pair, with the other alternatives
at 0 between them. "None is better" is kept too (it is not asked again) and changes no
reward. One comparison per disliked answer; it is final, as a vote in an arena is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.db import IntegrityError, transaction

from webapp.chat.models import Message
from webapp.core.outbox import Task, enqueue
from webapp.learning.models import Comparison, Judgement, Sample
from webapp.learning.notify import push_learning_status

COMPARISON_VERSION = "comparison-v1"

State = Literal["none", "pending", "ready", "done"]


class ComparisonInvalid(ValueError):
    """The choice cannot be taken (not an answer offered, or already chosen): say why."""


def chosen_fingerprint(disliked_id: int) -> str:
    """The evidence a chosen answer is judged on: the comparison with the one disliked."""
    return f"chosen over {disliked_id}"


def alternatives_of(disliked: Message) -> list[Message]:
    """The answers sampled beside ``disliked``, oldest first: what the comparison offers."""
    return list(
        Message.objects.filter(
            conversation_id=disliked.conversation_id,
            parent_id=disliked.parent_id,
            turn_type=Message.TurnType.UNSEEN,
        ).order_by("created_at", "id")
    )


@dataclass(frozen=True)
class ComparisonView:
    """What a 👎'd answer shows below it: the state, the answers offered and the choice made."""

    state: State
    """none: nothing to compare (not a bare 👎, or turned off); pending: the answers are being
    written; ready: offered; done: compared."""
    alternatives: list[Message]
    comparison: Comparison | None = None

    @property
    def chosen_number(self) -> int | None:
        """The chosen answer's place among those offered (1 = the first), None if none."""
        chosen = self.comparison.chosen_id if self.comparison is not None else None
        numbers = {m.pk: i for i, m in enumerate(self.alternatives, start=1)}
        return numbers.get(chosen) if chosen is not None else None


def comparison_view(*, disliked: Message, bare_dislike: bool) -> ComparisonView:
    """Where the comparison of ``disliked`` stands; ``bare_dislike``: its owner's feedback is
    a 👎 and nothing more (the alternatives are written for those only)."""
    comparison = Comparison.objects.filter(disliked=disliked).select_related("chosen").first()
    alternatives = alternatives_of(disliked)
    if comparison is not None:
        return ComparisonView("done", alternatives, comparison)
    if alternatives and bare_dislike:
        return ComparisonView("ready", alternatives)
    if bare_dislike and settings.DISLIKE_ALTERNATIVES > 0 and disliked.conversation.train_consent:
        return ComparisonView("pending", [])
    return ComparisonView("none", [])


@transaction.atomic
def comparison_choose(*, disliked: Message, chosen: Message | None) -> Comparison:
    """Record that ``chosen`` (one of ``alternatives_of(disliked)``, or None: none was better)
    is better than ``disliked``; a chosen answer becomes a +1 sample in the disliked answer's
    group. ComparisonInvalid when it was not offered or a choice was already made."""
    Message.objects.select_for_update().get(pk=disliked.pk)
    if Comparison.objects.filter(disliked=disliked).exists():
        raise ComparisonInvalid("You already compared these answers.")
    offered = {m.pk: m for m in alternatives_of(disliked)}
    if not offered:
        raise ComparisonInvalid("There are no other answers to compare with this one yet.")
    if chosen is not None and chosen.pk not in offered:
        raise ComparisonInvalid("That answer was not one of those offered.")
    try:
        with transaction.atomic():
            comparison = Comparison.objects.create(disliked=disliked, chosen=chosen)
    except IntegrityError as exc:  # a second click raced the first
        raise ComparisonInvalid("You already compared these answers.") from exc
    if chosen is not None:
        _chosen_sample(disliked=disliked, chosen=offered[chosen.pk])
    push_learning_status(messages=[(disliked.conversation_id, disliked.pk)])
    return comparison


def _chosen_sample(*, disliked: Message, chosen: Message) -> None:
    """The chosen answer's +1 judgement and sample (its reward-0 sample superseded)."""
    unseen = Sample.objects.filter(message=chosen).order_by("-created_at").first()
    judgement = Judgement.objects.create(
        message=chosen,
        fingerprint=chosen_fingerprint(disliked.pk),
        source=Judgement.Source.CHOSEN,
        score=1,
        prompt_version=COMPARISON_VERSION,
    )
    if unseen is None or not disliked.conversation.train_consent:
        return
    Sample.objects.filter(message=chosen, status=Sample.Status.READY).update(
        status=Sample.Status.SUPERSEDED,
        exclusion_reason=f"superseded by judgement {judgement.pk}: chosen over the disliked answer",
    )
    Sample.objects.create(
        message=chosen,
        judgement=judgement,
        kind=Sample.Kind.RL,
        reward=1.0,
        prompt_messages=unseen.prompt_messages,
        prompt_token_ids=unseen.prompt_token_ids,
        response_token_ids=unseen.response_token_ids,
        response_logprobs=unseen.response_logprobs,
        group_key=unseen.group_key,
        policy_version=unseen.policy_version,
    )
    enqueue(Task.MAYBE_TRAIN)
