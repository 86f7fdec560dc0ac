from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.api.keys import api_key_revoke
from webapp.api.models import ApiKey
from webapp.chat.models import Conversation
from webapp.core.admin_helpers import admin_list_link
from webapp.core.audit import AuditedAdmin


@admin.register(ApiKey)
class ApiKeyAdmin(AuditedAdmin):
    list_display = ("prefix", "name", "owner", "is_active", "created_at", "last_used_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "created_at", "last_used_at")
    search_fields = ("prefix", "name", "owner__username")
    fields = (
        "owner",
        "name",
        "prefix",
        "conversations_link",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = (
        "prefix",
        "conversations_link",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    raw_id_fields = ("owner",)
    list_select_related = ("owner",)
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A key's secret is shown once, at creation: keys are made on the settings page or with
        # `manage.py create_api_key`, never here.
        return False

    @admin.display(description="active", boolean=True)
    def is_active(self, obj: ApiKey) -> bool:
        return obj.is_active

    @admin.display(description="conversations")
    def conversations_link(self, obj: ApiKey) -> object:
        return admin_list_link(
            Conversation, "sessions made with this key", api_key__id__exact=obj.pk
        )

    @admin.action(description="Revoke the selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")
