"""Where a person's learning stands, in plain words: what Parley has from them towards the next
update, the update training now and its stage, the version live and what taught it, and why the
newest one was not used.

"What Parley has" follows the claim's own rule (``workflows.claiming``): ready samples with a
signal (a reward, a hint or a correction) of the person's lineage, of the kinds the configured
algorithm trains, not held by a pause, and not already in the batch being trained. An update
starts when they fill ``PARLEY_TRAIN_BATCH_SIZE``, or once the oldest has waited
``PARLEY_TRAIN_MAX_WAIT_S`` (the periodic check runs every minute). The stage of an update is
read from what it records: queued (waiting for its turn), running with no step yet (getting
ready: loading, the teacher's log-probs, refining), each step's metrics (``trainer.update``
yields one dict per optimizer step, ``steps_per_batch`` in all), then the gate (checking the new
version) until it is finished.

The chat page and My model show it (``templates/mymodel/_progress.html``);
``webapp.learning.notify`` pushes it to open chat pages when feedback is judged or an update
finishes, and the fragment asks again on its own while something is under way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone

from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.plain_words import failure_words, refusals_words, taught_words
from webapp.learning.preferences import learning_paused
from webapp.learning.selectors import lineage_owner_id, policy_version_live
from webapp.learning.taught import feedback_taught, taught_counts, version_sample_ids
from webapp.learning.workflows.claiming import (
    ACTIVE,
    claimable_samples,
    lineage_samples,
    train_slots,
)

# trainer.claim.has_signal, as a query (every field is NOT NULL)
WITH_SIGNAL = ~Q(reward=0) | ~Q(hint="") | ~Q(correction="")


@dataclass(frozen=True)
class TrainingNow:
    """The lineage's update that is queued or running."""

    update: TrainingUpdate
    stage: str
    samples: int
    others_running: int


@dataclass(frozen=True)
class LearningProgress:
    personal: bool
    paused: bool
    waiting: int
    """Feedback with a signal towards the next update."""
    batch_size: int
    starts_in_s: float | None
    """Seconds before the waiting rule starts an update (0: due now; None: nothing waits)."""
    trainer_full: bool
    """Every train slot is taken (by other people's updates too)."""
    kept_while_paused: int = 0
    training: TrainingNow | None = None
    going_live: PolicyVersion | None = None
    live: PolicyVersion | None = None
    serving: PolicyVersion | None = None
    live_taught: str = ""
    not_used: PolicyVersion | None = None
    not_used_reasons: list[str] = field(default_factory=list)
    not_used_retried: bool = False
    failed: TrainingUpdate | None = None

    @property
    def busy(self) -> bool:
        """Something is under way, or starts within the minute: the page asks again soon."""
        starting = self.starts_in_s is not None and self.starts_in_s < 60
        return bool(self.training or self.going_live or (self.waiting and starting))

    @property
    def whose(self) -> str:
        return "your model" if self.personal else "the shared model"

    @property
    def headline(self) -> str:
        """The one sentence that says where learning stands now."""
        if self.training is not None:
            return f"Training {self.whose} now: {self.training.stage}."
        if self.going_live is not None:
            return f"Version {self.going_live.number} passed the checks and is going live…"
        if self.paused:
            kept = self.kept_while_paused
            return (
                f"Learning is paused: Parley keeps your feedback ({kept} "
                f"{'piece' if kept == 1 else 'pieces'} so far) but learns nothing from it "
                "until you resume."
            )
        if not self.waiting:
            return (
                "Nothing new to learn from yet: rate an answer 👍 or 👎, correct it, "
                "or just tell Parley in the chat."
            )
        pieces = f"{self.waiting} {'piece' if self.waiting == 1 else 'pieces'} of feedback"
        if self.starts_in_s:
            return (
                f"Parley has {self.waiting} of the {self.batch_size} pieces of feedback that "
                f"start an update; with fewer, it starts one {minutes(self.starts_in_s)}."
            )
        if self.trainer_full:
            return (
                f"Parley has {pieces} to learn from: an update starts as soon as the trainer "
                "is free (it is training other people's models now)."
            )
        return f"Parley has {pieces} to learn from: an update starts in a moment."

    @property
    def news(self) -> list[str]:
        """What happened last, newest first: an update that stopped, a version not used, the
        version live and what taught it."""
        lines = []
        if self.training is not None:
            lines.append(
                f"It learns from {self.training.samples} "
                f"{'piece' if self.training.samples == 1 else 'pieces'} of feedback."
            )
            if self.waiting:
                lines.append(f"{self.waiting} more will go into the update after it.")
        if self.failed is not None:
            why = failure_words(self.failed.error)
            lines.append(f"The last update stopped without a new version: {why}.")
        if self.not_used is not None:
            reasons = "; ".join(self.not_used_reasons)
            again = " Its feedback will be tried again." if self.not_used_retried else ""
            lines.append(f"Version {self.not_used.number} was not used: {reasons}.{again}")
        if self.live is not None:
            taught = f": learnt from {self.live_taught}" if self.live_taught else ""
            lines.append(f"Version {self.live.number} is live{taught}.")
        elif self.personal and self.serving is not None:
            lines.append(
                "No version of your own yet: "
                + ("the shared model" if self.serving.number else "the starting model")
                + " answers you."
            )
        return lines


def minutes(seconds: float) -> str:
    """ "in about 7 minutes", rounded up, never "in about 0 minutes".

    >>> minutes(61), minutes(5)
    ('in about 2 minutes', 'in about a minute')
    """
    n = max(1, math.ceil(seconds / 60))
    return "in about a minute" if n == 1 else f"in about {n} minutes"


def training_stage(update: TrainingUpdate) -> str:
    """The update's stage in words, from its status and the steps it has recorded."""
    if update.status == TrainingUpdate.Status.QUEUED:
        return "waiting for its turn"
    done = len(update.metrics) if isinstance(update.metrics, list) else 0
    steps = update.config.get("steps_per_batch") if isinstance(update.config, dict) else None
    if done == 0:
        return "getting ready"
    if not isinstance(steps, int) or steps <= 0:
        return "learning"
    if done < steps:
        return f"learning, step {done + 1} of {steps}"
    return "checking the new version"


def _batch_ids(update: TrainingUpdate | None) -> list[int]:
    if update is None or not isinstance(update.summary, dict):
        return []
    return [i for i in update.summary.get("sample_ids", []) if isinstance(i, int)]


def learning_progress(*, user_id: int) -> LearningProgress:
    """Where the learning of ``user_id``'s lineage stands (their own, or the shared one with
    ``PARLEY_LEARNING_SCOPE=shared``)."""
    owner_id = lineage_owner_id(user=user_id)
    paused = learning_paused(user_id=user_id)
    active = list(TrainingUpdate.objects.filter(status__in=ACTIVE).order_by("created_at", "pk"))
    mine = next((u for u in active if u.owner_id == owner_id), None)
    waiting = (
        claimable_samples(algorithm=settings.TRAIN_ALGORITHM, owner_id=owner_id)
        .filter(WITH_SIGNAL)
        .exclude(pk__in=_batch_ids(mine))
        .aggregate(n=Count("pk"), oldest=Min("created_at"))
    )
    count, oldest = waiting["n"], waiting["oldest"]
    starts_in_s = None
    if count and count >= settings.TRAIN_BATCH_SIZE:
        starts_in_s = 0.0
    elif count:
        waited = (timezone.now() - oldest).total_seconds()
        starts_in_s = max(0.0, settings.TRAIN_MAX_WAIT_S - waited)
    kept = 0
    if paused:
        kept = (
            lineage_samples(Sample.objects.filter(status=Sample.Status.READY), owner_id=user_id)
            .filter(WITH_SIGNAL)
            .count()
        )
    training = None
    if mine is not None:
        training = TrainingNow(
            update=mine,
            stage=training_stage(mine),
            samples=len(_batch_ids(mine)),
            others_running=sum(
                1 for u in active if u is not mine and u.status == TrainingUpdate.Status.RUNNING
            ),
        )
    versions = PolicyVersion.objects.filter(owner_id=owner_id).exclude(number=0)
    live = versions.filter(status=PolicyVersion.Status.LIVE).first()
    newest = versions.order_by("-number").first()
    progress = LearningProgress(
        personal=owner_id is not None,
        paused=paused,
        waiting=count,
        batch_size=settings.TRAIN_BATCH_SIZE,
        starts_in_s=starts_in_s,
        trainer_full=len(active) >= train_slots(),
        kept_while_paused=kept,
        training=training,
        going_live=newest if newest and newest.status == PolicyVersion.Status.CANDIDATE else None,
        live=live,
        serving=policy_version_live(owner_id=owner_id),
        live_taught=_taught(live),
    )
    return _with_last_outcome(progress, newest=newest, owner_id=owner_id)


def _taught(version: PolicyVersion | None) -> str:
    if version is None:
        return ""
    ids = version_sample_ids(TrainingUpdate.objects.filter(produced_version=version).first())
    return taught_words(taught_counts(ids, feedback_taught(ids)))


def _with_last_outcome(
    progress: LearningProgress, *, newest: PolicyVersion | None, owner_id: int | None
) -> LearningProgress:
    """The newest version when it was refused, and the newest update when it failed after it."""
    changes: dict[str, object] = {}
    if newest is not None and newest.status == PolicyVersion.Status.REJECTED:
        reasons = newest.probe_metrics.get("reasons") if newest.probe_metrics else None
        update = TrainingUpdate.objects.filter(produced_version=newest).first()
        changes.update(
            not_used=newest,
            not_used_reasons=refusals_words(reasons if isinstance(reasons, list) else []),
            not_used_retried=Sample.objects.filter(
                pk__in=version_sample_ids(update), status=Sample.Status.READY
            ).exists(),
        )
    last = TrainingUpdate.objects.filter(owner_id=owner_id).order_by("-created_at", "-pk").first()
    if last is not None and last.status == TrainingUpdate.Status.FAILED:
        if newest is None or last.created_at > newest.created_at:
            changes["failed"] = last
    return replace(progress, **changes) if changes else progress
