"""Who changed what: every admin change, admin action and conversation delete leaves a record.

The record is Django's admin ``LogEntry`` (user, time, object, what was done), which the admin's
change, add and delete views already write. Two paths did not: admin actions, and deletes
that run through a service (a user's own "My data" delete, the admin's delete of a conversation,
which goes through the same service). ``audit_record`` writes those; ``AuditedAdmin`` wraps
every action of an admin so none runs without one. Staff read the log at Admin › Audit log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.db.models import Model, QuerySet
from django.http import HttpRequest


def audit_record(*, actor: Any, objects: Iterable[Model], flag: int, message: str) -> None:
    """One log entry per object: ``actor`` did ``message`` (flag: ADDITION, CHANGE, DELETION)."""
    rows = list(objects)
    if rows and actor is not None and actor.pk is not None:
        LogEntry.objects.log_actions(
            user_id=actor.pk, queryset=rows, action_flag=flag, change_message=message
        )


Action = Callable[[admin.ModelAdmin, HttpRequest, QuerySet[Any]], Any]


def _audited(action: Action, description: str) -> Action:
    def run(model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        objects = list(queryset)  # before the action: it may change what the queryset selects
        response = action(model_admin, request, queryset)
        audit_record(
            actor=request.user, objects=objects, flag=CHANGE, message=f"Action: {description}"
        )
        return response

    return run


class AuditedAdmin(admin.ModelAdmin):
    """An admin whose every action leaves a log entry per selected row.

    ``delete_selected`` is left alone: Django logs each deletion itself (``log_deletions``), and
    an admin that deletes through a service logs there instead.
    """

    def get_actions(self, request: HttpRequest) -> dict[str, tuple[Action, str, str]]:
        actions = super().get_actions(request)
        return {
            name: (func if name == "delete_selected" else _audited(func, str(text)), name, text)
            for name, (func, _, text) in actions.items()
        }


class NoWritesMixin:
    """An admin that can add, edit and delete nothing."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ViewOnlyAdmin(NoWritesMixin, AuditedAdmin):
    """Rows the loop writes, or that were trained on: admins look and act (actions, each one
    logged), never add, edit or delete."""
