"""Policy versions: the base model (version 0, no adapter) and every LoRA adapter trained since.

Judgements, samples and training updates join this module with the learning-loop work.
"""

from __future__ import annotations

from django.db import models


class PolicyVersion(models.Model):
    class Status(models.TextChoices):
        CANDIDATE = "candidate"
        LIVE = "live"
        RETIRED = "retired"
        ROLLED_BACK = "rolled_back"
        REJECTED = "rejected"

    number = models.PositiveIntegerField(unique=True)
    adapter_path = models.CharField(max_length=500, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CANDIDATE)
    probe_metrics = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["status"], condition=models.Q(status="live"), name="one_live_policy_version"
            )
        ]

    def __str__(self) -> str:
        return f"v{self.number}"

    @property
    def label(self) -> str:
        return f"v{self.number}"

    def served_name(self, model_id: str) -> str:
        """The name vLLM knows this version by: the base model for v0, else the adapter's."""
        return "base" if self.number == 0 else f"{model_id}-v{self.number}"
