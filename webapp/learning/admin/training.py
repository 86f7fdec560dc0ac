"""Policy versions (publish / roll back), training updates (their metrics per step), and who
paused learning."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join

from trainer.algorithms import ALGORITHMS, all_step_columns
from webapp.chat.models import Message
from webapp.core.admin_helpers import (
    EMPTY,
    admin_link,
    admin_list_link,
    pretty_json,
    table,
)
from webapp.learning.admin.common import OwnerFilter, ViewOnlyAdmin, owner_name, produced_by
from webapp.learning.models import LearningPreference, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.workflows.publishing import PublishFailed, policy_version_publish


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ViewOnlyAdmin):
    list_display = (
        "label",
        "owner_label",
        "status",
        "parent",
        "probe_kl",
        "probe_kl_base",
        "probe_ppl",
        "produced_by_link",
        "created_at",
        "published_at",
    )
    list_filter = (OwnerFilter, "status", "created_at", "published_at")
    search_fields = ("adapter_path", "owner__username")
    list_select_related = ("parent", "produced_by", "owner")
    fields = (
        "number",
        "owner_label",
        "status",
        "adapter_path",
        "parent_link",
        "produced_by_link",
        "probe_table",
        "chain_links",
        "created_at",
        "published_at",
    )
    readonly_fields = fields
    actions = ["make_live"]

    @admin.display(description="owner", ordering="owner__username")
    def owner_label(self, obj: PolicyVersion) -> str:
        return owner_name(obj)

    @admin.display(description="step KL (gated)")
    def probe_kl(self, obj: PolicyVersion) -> Any:
        return obj.probe_metrics.get("probe_kl", EMPTY)

    @admin.display(description="KL from base")
    def probe_kl_base(self, obj: PolicyVersion) -> Any:
        return obj.probe_metrics.get("probe_kl_base", EMPTY)

    @admin.display(description="probe ppl")
    def probe_ppl(self, obj: PolicyVersion) -> Any:
        return obj.probe_metrics.get("probe_ppl", EMPTY)

    @admin.display(description="parent")
    def parent_link(self, obj: PolicyVersion) -> object:
        return admin_link(obj.parent)

    @admin.display(description="produced by")
    def produced_by_link(self, obj: PolicyVersion) -> object:
        return admin_link(produced_by(obj))

    @admin.display(description="probe metrics")
    def probe_table(self, obj: PolicyVersion) -> object:
        rows = [{"metric": k, "value": v} for k, v in sorted(obj.probe_metrics.items())]
        return table(rows, ("metric", "value"))

    @admin.display(description="related")
    def chain_links(self, obj: PolicyVersion) -> object:
        links = [
            admin_list_link(Message, "answers it served", policy_version__id__exact=obj.pk),
            admin_list_link(Sample, "samples from its answers", policy_version__id__exact=obj.pk),
        ]
        update = produced_by(obj)
        if update is not None:
            links.append(
                admin_list_link(Sample, "samples trained into it", update__id__exact=update.pk)
            )
        return format_html_join(" · ", "{}", ((link,) for link in links))

    def has_publish_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("learning.change_policyversion")

    @admin.action(description="Roll back to / publish this version", permissions=["publish"])
    def make_live(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one version.", level=messages.ERROR)
            return
        version = queryset.get()
        try:
            policy_version_publish(version=version)
        except PublishFailed as exc:
            self.message_user(request, f"Not published: {exc}", level=messages.ERROR)
            return
        self.message_user(request, f"{version.label} is live (loaded where its lineage is served).")


@admin.register(TrainingUpdate)
class TrainingUpdateAdmin(ViewOnlyAdmin):
    list_display = (
        "id",
        "owner_label",
        "algorithm",
        "status",
        "base_version",
        "produced_version",
        "sample_count",
        "last_loss",
        "created_at",
        "finished_at",
    )
    list_filter = (OwnerFilter, "status", "algorithm", "base_version", "created_at", "finished_at")
    search_fields = ("error", "algorithm", "owner__username")
    list_select_related = ("base_version", "produced_version", "owner")
    fields = (
        "owner_label",
        "algorithm",
        "status",
        "base_version_link",
        "produced_version_link",
        "samples_link",
        "config_pretty",
        "metrics_table",
        "summary_pretty",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[TrainingUpdate]:
        return super().get_queryset(request).annotate(sample_total=Count("samples"))

    @admin.display(description="owner", ordering="owner__username")
    def owner_label(self, obj: TrainingUpdate) -> str:
        return owner_name(obj)

    @admin.display(description="samples", ordering="sample_total")
    def sample_count(self, obj: TrainingUpdate) -> int:
        return obj.sample_total  # type: ignore[attr-defined]

    @admin.display(description="last loss")
    def last_loss(self, obj: TrainingUpdate) -> str:
        losses = [m["loss"] for m in obj.metrics if isinstance(m, dict) and "loss" in m]
        return f"{losses[-1]:.4g}" if losses else EMPTY

    @admin.display(description="base version")
    def base_version_link(self, obj: TrainingUpdate) -> object:
        return admin_link(obj.base_version)

    @admin.display(description="produced version")
    def produced_version_link(self, obj: TrainingUpdate) -> object:
        return admin_link(obj.produced_version)

    @admin.display(description="samples")
    def samples_link(self, obj: TrainingUpdate) -> object:
        return admin_list_link(Sample, "samples it consumed", update__id__exact=obj.pk)

    @admin.display(description="config")
    def config_pretty(self, obj: TrainingUpdate) -> object:
        return pretty_json(obj.config)

    @admin.display(description="metrics per step")
    def metrics_table(self, obj: TrainingUpdate) -> object:
        steps = [m for m in obj.metrics if isinstance(m, dict) and "step" in m]
        present = {key for step in steps for key in step}
        algorithm = ALGORITHMS.get(obj.algorithm)
        columns = algorithm.step_columns if algorithm else all_step_columns()
        return table(steps, [c for c in columns if c in present])

    @admin.display(description="summary")
    def summary_pretty(self, obj: TrainingUpdate) -> object:
        return pretty_json(obj.summary)


@admin.register(LearningPreference)
class LearningPreferenceAdmin(ViewOnlyAdmin):
    """Who paused learning on "My model" (only they change it)."""

    list_display = ("user", "paused", "updated_at")
    list_filter = ("paused",)
    search_fields = ("user__username",)
    list_select_related = ("user",)
    fields = ("user", "paused", "updated_at")
    readonly_fields = fields
