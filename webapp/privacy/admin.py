"""The user admin, whose delete removes each conversation through the "My data" service like
every other delete (each logged with what was already trained), then the account."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.core.audit import AuditedAdmin
from webapp.privacy.services import my_conversation_delete, service_owned_perms

User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class ParleyUserAdmin(AuditedAdmin, UserAdmin):
    """Deleting a user deletes their conversations through the "My data" service first (each
    logged with what was already trained), then the account."""

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # The service owns the deletion of conversations and what they left in the learning
        # loop, whose own admins are view-only; their delete permission is not asked for.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, service_owned_perms(perms_needed), protected

    def _delete_conversations(self, request: HttpRequest, users: Any) -> None:
        for user in users:
            for conversation in user.conversations.all():
                my_conversation_delete(
                    conversation=conversation, actor=request.user, via="the admin (account deleted)"
                )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._delete_conversations(request, [obj])
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._delete_conversations(request, queryset)
        super().delete_queryset(request, queryset)
