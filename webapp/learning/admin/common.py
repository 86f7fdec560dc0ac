"""What every learning admin shares: view-only pages, the conversation filter, chain lookups."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.core.audit import ViewOnlyAdmin
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate


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
