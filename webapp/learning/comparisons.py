"""Which is better? A person compares the answers sampled beside one they disliked.

A bare 👎 says an answer missed, not what would have hit. The version that wrote it writes
``PARLEY_DISLIKE_ALTERNATIVES`` more answers to the same prompt in the background
(``webapp.learning.alternatives``); the answer then offers them, below its 👎: "Is one of them
better?".
An answer the person chooses gets a judgement of its own (source ``chosen``, +1) and a +1
sample in the disliked answer's group, so the update's group advantage (GRPO) moves the model
from the disliked answer toward the chosen one: a preference pair, with the other alternatives
at 0 between them. "None is better" is kept too (it is not asked again) and changes no
reward. One comparison per disliked answer; it is final, as a vote in an arena is. It is
offered only while the 👎's group waits for its update (trained, there is no pair left to
train) and while the 👎 is still bare; a 👎 withdrawn later takes the chosen sample with it
(``webapp.learning.services.message_judging_skip``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from webapp.chat.models import Feedback, Message
from webapp.core.outbox import Task, enqueue
from webapp.learning.alternatives import chosen_fingerprint, prompt_job
from webapp.learning.models import AlternativesJob, Comparison, Judgement, Sample
from webapp.learning.notify import push_learning_status
from webapp.learning.secret_guard import SECRET_REASON
from webapp.memory.choice_cues import form_difference
from webapp.memory.proposing import memories_propose_from_choices

COMPARISON_VERSION = "comparison-v1"

State = Literal["none", "queued", "writing", "ready", "failed", "done"]

BUSY_AFTER = timedelta(seconds=5)
"""Answers not started this long after the 👎 wait for a busy machine: the page says so."""
CHATS_RECENT = timedelta(minutes=15)
"""Chat answers marked as being written for longer than this are not counted as busy work."""
CHOICES_READ = 10
"""A person's latest choices read for a standing preference (``webapp.memory.choice_cues``)."""


class ComparisonInvalid(ValueError):
    """The choice cannot be taken (not an answer offered, no longer a bare 👎, already chosen,
    or the 👎 already trained): say why."""


def alternatives_of(disliked: Message) -> list[Message]:
    """The answers sampled beside ``disliked``, oldest first: what the comparison offers.

    They are its prompt's hidden siblings, so a regenerated answer to the same message that is
    disliked too is offered the same ones (they answer the same prompt)."""
    return list(
        Message.objects.filter(
            conversation_id=disliked.conversation_id,
            parent_id=disliked.parent_id,
            turn_type=Message.TurnType.UNSEEN,
        ).order_by("created_at", "id")
    )


def owner_gave_bare_dislike(message: Message) -> bool:
    """Whether the owner's feedback on this main answer is a 👎 and nothing more (no tag,
    comment or answer): the only feedback the alternatives are written for."""
    if not message.is_assistant or message.turn_type != Message.TurnType.MAIN:
        return False
    feedback = Feedback.objects.filter(
        message=message, author_id=message.conversation.owner_id
    ).first()
    return (
        feedback is not None
        and feedback.rating == -1
        and not (feedback.comment or feedback.correction or feedback.tags)
    )


def _dislike_waiting(disliked: Message) -> bool:
    """The 👎's sample is ready (its group not trained yet), or the 👎 is not judged yet."""
    samples = Sample.objects.filter(message=disliked)
    if samples.filter(status=Sample.Status.READY).exists():
        return True
    return not samples.exists() and not Judgement.objects.filter(message=disliked).exists()


@dataclass(frozen=True)
class ComparisonView:
    """What a 👎'd answer shows below it: the state, the answers offered and the choice made,
    and while the answers are on their way, what they wait for."""

    state: State
    """none: nothing to compare (not a bare 👎, turned off, no consent, or the 👎's group
    already trained); queued: the 👎 is being read or the answers wait for the machine;
    writing: being written; ready: offered; failed: none could be written (``error``);
    done: compared."""
    alternatives: list[Message]
    comparison: Comparison | None = None
    since: datetime | None = None
    """When the 👎 was given (queued) or the writing began (writing)."""
    ahead: int = 0
    """Other 👎s' answers being written, or queued before these."""
    chats: int = 0
    """Chat answers being written now (the machine serves them too)."""
    error: str = ""

    @property
    def waited_s(self) -> int:
        return int((timezone.now() - self.since).total_seconds()) if self.since else 0

    @property
    def busy(self) -> bool:
        """Queued past ``BUSY_AFTER``: the machine is busy with other work."""
        return self.state == "queued" and self.waited_s >= BUSY_AFTER.total_seconds()

    @property
    def busy_reason(self) -> str:
        """What the machine is doing instead, in plain words."""
        parts = []
        if self.ahead:
            plural = "s" if self.ahead > 1 else ""
            parts.append(f"writing other answers for {self.ahead} earlier 👎{plural}")
        if self.chats:
            plural = "s" if self.chats > 1 else ""
            parts.append(f"writing {self.chats} chat answer{plural}")
        return " and ".join(parts) or "finishing other background work first"

    @property
    def waited(self) -> str:
        """How long, in words: "40 s", "3 min"."""
        seconds = self.waited_s
        return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"

    @property
    def chosen_number(self) -> int | None:
        """The chosen answer's place among those offered (1 = the first), None if none."""
        chosen = self.comparison.chosen_id if self.comparison is not None else None
        numbers = {m.pk: i for i, m in enumerate(self.alternatives, start=1)}
        return numbers.get(chosen) if chosen is not None else None


def _holds_secret(answer: Message) -> bool:
    return Sample.objects.filter(
        message=answer, exclusion_reason__startswith=SECRET_REASON
    ).exists()


def comparison_view(*, disliked: Message) -> ComparisonView:
    """Where the comparison of ``disliked`` stands, from the database: the answers are shown as
    soon as they exist, whatever their job says."""
    comparison = Comparison.objects.filter(disliked=disliked).select_related("chosen").first()
    if comparison is not None:
        return ComparisonView("done", alternatives_of(disliked), comparison)
    offered = (
        settings.DISLIKE_ALTERNATIVES > 0
        and disliked.conversation.train_consent
        and owner_gave_bare_dislike(disliked)
        and _dislike_waiting(disliked)
    )
    if not offered:
        return ComparisonView("none", [])
    written = alternatives_of(disliked)
    # an answer that wrote what looks like a secret is never learnt from, so not offered
    alternatives = [a for a in written if not _holds_secret(a)]
    if alternatives:
        return ComparisonView("ready", alternatives)
    if written:
        return ComparisonView("none", [])
    job = prompt_job(disliked)
    if job is None:
        if Sample.objects.filter(message=disliked).exists():
            return ComparisonView("none", [])  # read without asking for any (not a bare 👎)
        # The 👎 waits to be read: reading it queues the answers.
        given = Feedback.objects.filter(
            message=disliked, author_id=disliked.conversation.owner_id
        ).values_list("updated_at", flat=True)
        return _waiting("queued", since=given.first(), job=None)
    if job.status == AlternativesJob.Status.QUEUED:
        return _waiting("queued", since=job.queued_at, job=job)
    if job.status == AlternativesJob.Status.WRITING:
        return _waiting("writing", since=job.started_at, job=job)
    return ComparisonView("failed", [], error=job.error or "the model wrote nothing")


def _waiting(
    state: State, *, since: datetime | None, job: AlternativesJob | None
) -> ComparisonView:
    """The answers are on their way: what the machine does meanwhile."""
    now = timezone.now()
    others = AlternativesJob.objects.exclude(pk=job.pk) if job else AlternativesJob.objects
    before = job.queued_at if job is not None else now
    ahead = others.filter(status=AlternativesJob.Status.WRITING).count()
    if state == "queued":
        ahead += others.filter(status=AlternativesJob.Status.QUEUED, queued_at__lt=before).count()
    chats = Message.objects.filter(
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        created_at__gt=now - CHATS_RECENT,
    ).count()
    return ComparisonView(state, [], since=since, ahead=ahead, chats=chats)


@transaction.atomic
def comparison_choose(*, disliked: Message, chosen: Message | None) -> Comparison:
    """Record that ``chosen`` (one of ``alternatives_of(disliked)``, or None: none was better)
    is better than ``disliked``; a chosen answer becomes a +1 sample in the disliked answer's
    group, trained with it. ComparisonInvalid when the comparison is not offered any more
    (``comparison_view`` is not "ready"), the answer was not offered, or a choice was made."""
    disliked = (
        Message.objects.select_for_update(of=("self",))
        .select_related("conversation")
        .get(pk=disliked.pk)
    )
    if Comparison.objects.filter(disliked=disliked).exists():
        raise ComparisonInvalid("You already compared these answers.")
    view = comparison_view(disliked=disliked)
    if view.state != "ready":
        raise ComparisonInvalid(
            "There are no other answers to compare with this one"
            + (" yet." if view.state in ("queued", "writing") else ".")
        )
    offered = {m.pk: m for m in view.alternatives}
    if chosen is not None and chosen.pk not in offered:
        raise ComparisonInvalid("That answer was not one of those offered.")
    if (
        chosen is not None
        and not Sample.objects.filter(message_id=chosen.pk, status=Sample.Status.READY).exists()
    ):
        raise ComparisonInvalid("That answer was already learnt from with the 👎.")
    try:
        with transaction.atomic():
            comparison = Comparison.objects.create(disliked=disliked, chosen=chosen)
    except IntegrityError as exc:  # a second click raced the first
        raise ComparisonInvalid("You already compared these answers.") from exc
    if chosen is not None:
        _chosen_sample(disliked=disliked, chosen=offered[chosen.pk])
        _propose_from_choices(disliked=disliked, chosen=offered[chosen.pk])
    push_learning_status(messages=[(disliked.conversation_id, disliked.pk)])
    return comparison


def _propose_from_choices(*, disliked: Message, chosen: Message) -> None:
    """A memory proposed under the disliked answer when this choice and an earlier one of the
    person's were made for the same form (a list, a shorter or a longer answer)."""
    owner_id = disliked.conversation.owner_id
    earlier = (
        Comparison.objects.filter(disliked__conversation__owner_id=owner_id, chosen__isnull=False)
        .exclude(disliked=disliked)
        .select_related("disliked", "chosen")
        .order_by("-created_at")[: CHOICES_READ - 1]
    )
    differences = [form_difference(chosen.content, disliked.content)]
    differences += [form_difference(c.chosen.content, c.disliked.content) for c in earlier]
    memories_propose_from_choices(
        owner_id=owner_id, message_id=disliked.pk, differences=differences
    )


def _chosen_sample(*, disliked: Message, chosen: Message) -> None:
    """The chosen answer's +1 judgement and sample, in place of its ready reward-0 one."""
    unseen = Sample.objects.get(message=chosen, status=Sample.Status.READY)
    judgement = Judgement.objects.create(
        message=chosen,
        fingerprint=chosen_fingerprint(disliked.pk),
        source=Judgement.Source.CHOSEN,
        score=1,
        prompt_version=COMPARISON_VERSION,
    )
    unseen.status = Sample.Status.SUPERSEDED
    unseen.exclusion_reason = (
        f"superseded by judgement {judgement.pk}: chosen over the disliked answer"
    )
    unseen.save(update_fields=["status", "exclusion_reason"])
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
