from __future__ import annotations

import json

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from webapp.learning.export import judgement_records, sample_records
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.services import sample_exclude
from webapp.learning.training import PublishFailed, policy_version_publish


def _jsonl_response(records: object, name: str) -> HttpResponse:
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)  # type: ignore[attr-defined]
    response = HttpResponse(body, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{name}.jsonl"'
    return response


@admin.register(PolicyVersion)
class PolicyVersionAdmin(admin.ModelAdmin):
    list_display = ("label", "status", "parent", "created_at", "published_at")
    list_filter = ("status",)
    readonly_fields = ("created_at", "published_at", "probe_metrics")
    actions = ["make_live"]

    @admin.action(description="Roll back to / publish this version")
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
        self.message_user(request, f"{version.label} is live on every serving replica.")


@admin.register(Judgement)
class JudgementAdmin(admin.ModelAdmin):
    list_display = ("id", "message", "source", "score", "judge_model", "created_at")
    list_filter = ("source", "score", "created_at")
    search_fields = ("message__content", "hint", "next_state_text")
    raw_id_fields = ("message",)
    list_select_related = ("message",)
    actions = ["export_jsonl"]

    @admin.action(description="Export selected as JSONL")
    def export_jsonl(self, request: HttpRequest, queryset: QuerySet[Judgement]) -> HttpResponse:
        return _jsonl_response(judgement_records(queryset.order_by("pk")), "judgements")


@admin.register(Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "reward", "status", "policy_version", "update", "created_at")
    list_filter = ("kind", "status", "reward", "policy_version", "created_at")
    search_fields = ("hint", "message__content")
    raw_id_fields = ("message", "judgement", "update")
    list_select_related = ("policy_version", "update")
    actions = ["export_jsonl", "exclude_from_training"]

    @admin.action(description="Export selected as JSONL")
    def export_jsonl(self, request: HttpRequest, queryset: QuerySet[Sample]) -> HttpResponse:
        return _jsonl_response(sample_records(queryset.order_by("pk")), "samples")

    @admin.action(description="Exclude from training")
    def exclude_from_training(self, request: HttpRequest, queryset: QuerySet[Sample]) -> None:
        for sample in queryset:
            sample_exclude(sample=sample)
        self.message_user(request, f"Excluded {queryset.count()} ready sample(s).")


@admin.register(TrainingUpdate)
class TrainingUpdateAdmin(admin.ModelAdmin):
    list_display = ("id", "algorithm", "status", "base_version", "produced_version", "created_at")
    list_filter = ("status", "algorithm", "created_at")
    readonly_fields = (
        "config",
        "metrics",
        "summary",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    )
