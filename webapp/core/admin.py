"""The audit log: every admin change, action and delete, with who did it. (The user admin, whose
delete goes through the "My data" service, is in webapp/privacy/admin.py.)"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.http import HttpRequest

from webapp.core.audit import NoWritesMixin


@admin.register(LogEntry)
class AuditLogAdmin(NoWritesMixin, admin.ModelAdmin):
    """Read-only for everyone: a log that could be edited would not be one."""

    list_display = ("action_time", "user", "action_flag", "content_type", "object_repr", "what")
    list_filter = ("action_flag", "content_type", "action_time")
    search_fields = ("object_repr", "change_message", "user__username", "object_id")
    list_select_related = ("user", "content_type")
    date_hierarchy = "action_time"
    fields = (
        "action_time",
        "user",
        "action_flag",
        "content_type",
        "object_id",
        "object_repr",
        "what",
    )
    readonly_fields = fields

    @admin.display(description="what")
    def what(self, obj: LogEntry) -> str:
        return obj.get_change_message()

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)
