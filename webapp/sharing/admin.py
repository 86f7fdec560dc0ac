"""Share links in the admin: look, and revoke (an action through the service, logged).

They are never added or edited here: a link is made by its owner from the conversation's menu.
Deleting stays allowed, so that deleting a conversation or an account, which deletes its links
with it, needs no extra permission."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.core.audit import AuditedAdmin
from webapp.sharing.models import ShareLink
from webapp.sharing.services import share_link_revoke


@admin.register(ShareLink)
class ShareLinkAdmin(AuditedAdmin):
    list_display = ("conversation", "owner", "is_live", "created_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "created_at")
    search_fields = ("conversation__title", "conversation__owner__username")
    list_select_related = ("conversation__owner",)
    fields = ("conversation", "owner", "created_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(description="owner")
    def owner(self, obj: ShareLink) -> object:
        return obj.conversation.owner

    @admin.display(description="live", boolean=True)
    def is_live(self, obj: ShareLink) -> bool:
        return obj.is_live

    @admin.action(description="Revoke the selected share links")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ShareLink]) -> None:
        links = list(queryset)
        for link in links:
            share_link_revoke(link=link)
        self.message_user(request, f"Revoked {len(links)} link(s).")
