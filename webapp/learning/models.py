"""Policy versions: the base model (version 0, no adapter) and every LoRA adapter trained since.

Versions form lineages: the shared one (``owner`` empty: the base model and what everyone's
feedback trained, ``PARLEY_LEARNING_SCOPE=shared``) and one per user (``owner`` set: trained
only on that user's feedback and served only to them, ``PARLEY_LEARNING_SCOPE=user``). Each
lineage has at most one live version; numbers are unique across all lineages, so a number
names one adapter in vLLM. Judgements, samples and training updates join this module with the
learning-loop work.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PolicyVersion(models.Model):
    class Status(models.TextChoices):
        CANDIDATE = "candidate"
        LIVE = "live"
        RETIRED = "retired"
        ROLLED_BACK = "rolled_back"
        REJECTED = "rejected"

    number = models.PositiveIntegerField(unique=True)
    # PROTECT: a user's adapters hold what their feedback taught, and nothing is wiped.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="policy_versions",
        help_text="Whose lineage this version is in; empty for the shared lineage.",
    )
    adapter_path = models.CharField(max_length=500, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CANDIDATE)
    probe_metrics = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    # When it stopped being live (retired by a newer version, or its lineage reset): the
    # serving replicas drop it once that is longer ago than PARLEY_ADAPTER_UNLOAD_GRACE_S.
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]
        # One live version per lineage: two partial indexes, since NULL owners never collide
        # in a plain unique index.
        constraints = [
            models.UniqueConstraint(
                fields=["status"],
                condition=models.Q(status="live", owner__isnull=True),
                name="one_live_policy_version",
            ),
            models.UniqueConstraint(
                fields=["owner"],
                condition=models.Q(status="live", owner__isnull=False),
                name="one_live_policy_version_per_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"v{self.number}"

    @property
    def label(self) -> str:
        return f"v{self.number}"

    def served_name(self, model_id: str) -> str:
        """The name vLLM knows this version by: the base model for v0, else the adapter's."""
        return "base" if self.number == 0 else f"{model_id}-v{self.number}"


class Judgement(models.Model):
    """How one answer was judged: explicit feedback or the PRM's majority of m votes.

    ``fingerprint`` names the evidence judged (next state, feedback state); a redelivered task
    with the same evidence finds the row already there, so there is exactly one per evidence.
    """

    class Source(models.TextChoices):
        FEEDBACK = "feedback"
        PRM = "prm"
        SESSION_END = "session_end"
        UNSEEN = "unseen"  # an answer the user never saw, beside one they disliked
        CHOSEN = "chosen"  # one of those, which the user then chose over the disliked one

    message = models.ForeignKey("chat.Message", on_delete=models.CASCADE, related_name="judgements")
    fingerprint = models.CharField(max_length=64)
    source = models.CharField(max_length=16, choices=Source.choices)
    votes = models.JSONField(default=list, blank=True, help_text="Each vote: score and raw text.")
    score = models.SmallIntegerField(default=0)
    hint = models.TextField(blank=True)
    hint_votes = models.JSONField(default=list, blank=True)
    judge_model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=32, blank=True)
    next_state_text = models.TextField(blank=True)
    seconds = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["message", "fingerprint"], name="one_judgement_per_evidence"
            )
        ]

    def __str__(self) -> str:
        return f"{self.score:+d} on message {self.message_id} ({self.source})"


class TrainingUpdate(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        REJECTED = "rejected"

    algorithm = models.CharField(max_length=16)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="training_updates",
        help_text="Whose lineage the update trains (only their samples); empty: the shared one.",
    )
    config = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    base_version = models.ForeignKey(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="updates"
    )
    produced_version = models.OneToOneField(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="produced_by"
    )
    metrics = models.JSONField(default=list, blank=True, help_text="One entry per step.")
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"update {self.pk} ({self.algorithm}, {self.status})"


class Sample(models.Model):
    """One judged turn, holding everything training needs (the sampled tokens as served)."""

    class Kind(models.TextChoices):
        RL = "rl"
        OPD = "opd"
        COMBINED = "combined"
        # Context distillation of the person's memories: teacher = the policy with them in the
        # prompt (as served), student = the same turn without them; no judgement.
        MEMORY = "memory"

    class Status(models.TextChoices):
        READY = "ready"
        CONSUMED = "consumed"
        EXCLUDED = "excluded"
        SUPERSEDED = "superseded"

    message = models.ForeignKey("chat.Message", on_delete=models.CASCADE, related_name="samples")
    judgement = models.OneToOneField(
        Judgement, null=True, blank=True, on_delete=models.CASCADE, related_name="sample"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    reward = models.FloatField(default=0.0)
    hint = models.TextField(blank=True)
    correction = models.TextField(blank=True)
    prompt_messages = models.JSONField(default=list)
    prompt_token_ids = models.JSONField(default=list)
    response_token_ids = models.JSONField(default=list)
    response_logprobs = models.JSONField(default=list)
    group_key = models.CharField(max_length=64, blank=True, help_text="Siblings of one prompt.")
    policy_version = models.ForeignKey(
        PolicyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="samples"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.READY)
    update = models.ForeignKey(
        TrainingUpdate, null=True, blank=True, on_delete=models.PROTECT, related_name="samples"
    )
    refusals = models.PositiveSmallIntegerField(
        default=0, help_text="Updates that trained this sample and were refused by the gate."
    )
    exclusion_reason = models.TextField(
        blank=True, help_text="Why an excluded or superseded sample is never trained."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} sample of message {self.message_id} ({self.status})"


class Comparison(models.Model):
    """A person's answer to "is one of these better?": the answers sampled beside one they
    disliked, shown side by side (``webapp.learning.comparisons``). ``chosen`` is empty when
    none was better."""

    disliked = models.OneToOneField(
        "chat.Message", on_delete=models.CASCADE, related_name="comparison"
    )
    chosen = models.ForeignKey(
        "chat.Message",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="chosen_in",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.chosen_id or 'none'} over message {self.disliked_id}"


class AlternativesJob(models.Model):
    """The writing of the answers beside a bare 👎 (``webapp.learning.alternatives``): where it
    stands, so a page waiting for them knows from the database whether they are queued, being
    written, written or could not be. One per disliked answer; the answers themselves belong
    to its prompt, so a disliked sibling finds them through its own job or a sibling's."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        WRITING = "writing"
        DONE = "done"
        FAILED = "failed"

    disliked = models.OneToOneField(
        "chat.Message", on_delete=models.CASCADE, related_name="alternatives_job"
    )
    sample = models.ForeignKey(
        Sample, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    written = models.PositiveSmallIntegerField(default=0)
    error = models.CharField(max_length=300, blank=True, help_text="Why none were written.")
    queued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "queued_at"])]

    def __str__(self) -> str:
        return f"alternatives beside message {self.disliked_id}: {self.status}"


class LearningPreference(models.Model):
    """A user's say over what their feedback does. ``paused``: their samples are still recorded
    (judged, kept, exportable) but no update trains on them until they resume."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="learning_preference"
    )
    paused = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user} ({'paused' if self.paused else 'learning'})"
