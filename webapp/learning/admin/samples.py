"""Samples: what training consumes; exclude-from-training and export actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest, StreamingHttpResponse

from webapp.core.admin_helpers import (
    admin_link,
    jsonl_response,
    pretty_json,
)
from webapp.learning.admin.common import ConversationFilter, ViewOnlyAdmin
from webapp.learning.export import sample_records
from webapp.learning.models import Sample
from webapp.learning.secret_guard import SECRET_REASON
from webapp.learning.services import sample_exclude


class SecretFilter(admin.SimpleListFilter):
    """Samples set aside because their turn holds a secret (``webapp.learning.secret_guard``)."""

    title = "holds a secret"
    parameter_name = "secret"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: Any, queryset: QuerySet[Sample]) -> QuerySet[Sample]:
        held = Q(exclusion_reason__startswith=SECRET_REASON)
        if self.value() == "yes":
            return queryset.filter(held)
        if self.value() == "no":
            return queryset.exclude(held)
        return queryset


@admin.register(Sample)
class SampleAdmin(ViewOnlyAdmin):
    list_display = (
        "id",
        "message_link",
        "conversation_link",
        "kind",
        "reward",
        "status",
        "refusals",
        "policy_version",
        "update_link",
        "version_link",
        "created_at",
    )
    list_filter = (
        "kind",
        "status",
        "reward",
        "policy_version",
        "created_at",
        "consumed_at",
        ConversationFilter,
        SecretFilter,
    )
    search_fields = (
        "exclusion_reason",
        "hint",
        "correction",
        "message__content",
        "message__conversation__owner__username",
        "message__conversation__external_session_id",
    )
    list_select_related = ("message__conversation", "policy_version", "update__produced_version")
    fields = (
        "message_link",
        "conversation_link",
        "judgement_link",
        "update_link",
        "version_link",
        "kind",
        "status",
        "refusals",
        "exclusion_reason",
        "reward",
        "hint",
        "correction",
        "policy_version",
        "group_key",
        "prompt_messages_pretty",
        "prompt_token_ids",
        "response_token_ids",
        "response_logprobs",
        "created_at",
        "consumed_at",
    )
    readonly_fields = fields
    actions = ["export_jsonl", "exclude_from_training"]

    @admin.display(description="message")
    def message_link(self, obj: Sample) -> object:
        return admin_link(obj.message, f"#{obj.message_id}")

    @admin.display(description="conversation")
    def conversation_link(self, obj: Sample) -> object:
        return admin_link(obj.message.conversation)

    @admin.display(description="judgement")
    def judgement_link(self, obj: Sample) -> object:
        return admin_link(obj.judgement)

    @admin.display(description="consumed by update")
    def update_link(self, obj: Sample) -> object:
        return admin_link(obj.update, f"#{obj.update_id}" if obj.update_id else None)

    @admin.display(description="produced version")
    def version_link(self, obj: Sample) -> object:
        return admin_link(obj.update.produced_version if obj.update else None)

    @admin.display(description="prompt messages")
    def prompt_messages_pretty(self, obj: Sample) -> object:
        return pretty_json(obj.prompt_messages)

    @admin.action(description="Export selected as JSONL")
    def export_jsonl(
        self, request: HttpRequest, queryset: QuerySet[Sample]
    ) -> StreamingHttpResponse:
        samples = queryset.select_related("policy_version").order_by("pk")
        return jsonl_response(sample_records(samples), "samples")

    def has_exclude_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("learning.change_sample")

    @admin.action(description="Exclude from training", permissions=["exclude"])
    def exclude_from_training(self, request: HttpRequest, queryset: QuerySet[Sample]) -> None:
        excluded = 0
        for sample in queryset:
            was_ready = sample.status == Sample.Status.READY
            sample_exclude(sample=sample)
            excluded += was_ready
        skipped = queryset.count() - excluded
        note = f"; {skipped} were not ready (consumed ones stay as trained)" if skipped else ""
        self.message_user(request, f"Excluded {excluded} ready sample(s){note}.")
