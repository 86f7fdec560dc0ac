"""What every learning admin shares: view-only pages, the conversation filter, chain lookups,
and the re-judge action's notice (the message admin offers it too)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.chat.models import Message
from webapp.core.audit import ViewOnlyAdmin
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.services import messages_rejudge


class ConversationFilter(admin.SimpleListFilter):
    """``?conversation=<id>``: the rows of one conversation (the links from its admin page).

    It offers no choices in the sidebar (there may be thousands of conversations); it only
    makes the parameter a valid filter.
    """

    title = "conversation"
    parameter_name = "conversation"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[Any]:
        return []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value and str(value).isdigit():
            return queryset.filter(message__conversation_id=int(value))
        return queryset


class OwnerFilter(admin.SimpleListFilter):
    """``?owner=<user id>`` or ``?owner=shared``: one lineage's rows. The sidebar offers the
    shared lineage and every user who has rows here (one query)."""

    title = "owner (lineage)"
    parameter_name = "owner"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[Any]:
        owners = (
            model_admin.model._default_manager.filter(owner__isnull=False)
            .values_list("owner_id", "owner__username")
            .distinct()
            .order_by("owner__username")
        )
        return [("shared", "shared"), *((str(pk), name) for pk, name in owners)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "shared":
            return queryset.filter(owner__isnull=True)
        if value and str(value).isdigit():
            return queryset.filter(owner_id=int(value))
        return queryset


def owner_name(obj: PolicyVersion | TrainingUpdate) -> str:
    return obj.owner.get_username() if obj.owner_id else "shared"


__all__ = [
    "ConversationFilter",
    "OwnerFilter",
    "ViewOnlyAdmin",
    "owner_name",
    "produced_by",
    "rejudge_notice",
    "sample_of",
]


def sample_of(judgement: Judgement) -> Sample | None:
    try:
        return judgement.sample
    except Sample.DoesNotExist:
        return None


def produced_by(version: PolicyVersion) -> TrainingUpdate | None:
    try:
        return version.produced_by
    except TrainingUpdate.DoesNotExist:
        return None


def rejudge_notice(
    request: HttpRequest, model_admin: admin.ModelAdmin, answers: list[Message]
) -> None:
    """Queue the judge again for ``answers`` and tell the admin what will and will not change."""
    result = messages_rejudge(messages=answers)
    model_admin.message_user(request, f"Queued {len(result.queued)} answer(s) for judging.")
    if result.unchanged:
        model_admin.message_user(
            request,
            f"{len(result.unchanged)} of them have the same evidence (next state and feedback) "
            "as their last judgement, so they keep it: the judge is idempotent per evidence.",
            level=messages.WARNING,
        )
    if result.skipped:
        reasons = "; ".join(f"{pk}: {why}" for pk, why in sorted(result.skipped.items()))
        model_admin.message_user(
            request, f"Not judged (never trained): {reasons}", level=messages.WARNING
        )
