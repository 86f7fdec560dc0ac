"""Admin for conversations, messages and feedback: declarative and read-only where it matters.

Messages and feedback are what the loop judged and trained on: view-only, like judgements and
samples. A conversation's title may be renamed (logged); deleting one goes through the "My data"
service, which deletes what it left in the loop, says what was already trained, and logs it.

Each page links along the learning chain (conversation → message → judgements → samples → the
update that consumed them → the version it produced); list pages select their related rows so
a page costs the same few queries however many rows it shows.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils.html import format_html

from webapp.chat.models import Conversation, Feedback, Message
from webapp.core.admin_helpers import admin_link, admin_list_link, jsonl_response, pretty_json
from webapp.core.audit import AuditedAdmin, ViewOnlyAdmin
from webapp.learning.admin.common import rejudge_notice
from webapp.learning.export import conversation_records
from webapp.learning.models import Judgement, Sample
from webapp.privacy.selectors import conversation_footprint
from webapp.privacy.services import deletion_summary, my_conversation_delete, service_owned_perms


class MessageInline(admin.TabularInline):
    model = Message
    fields = (
        "message_link",
        "role",
        "turn_type",
        "status",
        "turn_index",
        "selected",
        "policy_version",
        "content",
        "judgements_link",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).select_related("policy_version")

    @admin.display(description="message")
    def message_link(self, obj: Message) -> object:
        return admin_link(obj, f"#{obj.pk}")

    @admin.display(description="judgements")
    def judgements_link(self, obj: Message) -> object:
        if obj.role != Message.Role.ASSISTANT:
            return ""
        return admin_list_link(Judgement, "judgements", message__id__exact=obj.pk)


@admin.register(Conversation)
class ConversationAdmin(AuditedAdmin):
    list_display = (
        "__str__",
        "owner",
        "source",
        "external_session_id",
        "message_count",
        "train_consent",
        "last_activity_at",
        "closed_at",
    )
    list_filter = ("source", "train_consent", "created_at", "last_activity_at", "closed_at")
    search_fields = ("title", "owner__username", "external_session_id")
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "api_key")
    # Only the title is the admin's to change: who owns it, where it came from and whether it
    # may be trained on are the owner's (and what it already taught cannot be undone).
    readonly_fields = (
        "owner",
        "source",
        "external_session_id",
        "api_key",
        "train_consent",
        "created_at",
        "last_activity_at",
        "closed_at",
        "finalize_skip_reason",
        "learning_links",
    )
    date_hierarchy = "created_at"
    inlines = [MessageInline]
    actions = ["export_jsonl"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What the delete page lists, headed by what was already trained (which stays)."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        trained = [
            f"Already trained: {f.trained_samples} sample(s) into "
            f"{', '.join(v.label for v in f.versions) or 'an update'} from “{c}” — what they "
            "taught stays in those weights."
            for c in objs
            if (f := conversation_footprint(conversation=c)).trained_samples
        ]
        return [*trained, *deleted], counts, service_owned_perms(perms_needed), protected

    def log_deletions(self, request: HttpRequest, queryset: Any) -> None:
        """Logged by ``my_conversation_delete`` instead, with what was already trained."""

    def delete_model(self, request: HttpRequest, obj: Conversation) -> None:
        title = str(obj)
        footprint = my_conversation_delete(conversation=obj, actor=request.user, via="the admin")
        self.message_user(request, f"Deleted “{title}”: {deletion_summary(footprint)}")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        for conversation in list(queryset):
            self.delete_model(request, conversation)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).annotate(message_total=Count("messages"))

    @admin.display(description="messages", ordering="message_total")
    def message_count(self, obj: Conversation) -> int:
        return obj.message_total  # type: ignore[attr-defined]

    @admin.display(description="learning")
    def learning_links(self, obj: Conversation) -> object:
        return format_html(
            "{} · {}",
            admin_list_link(Judgement, "judgements", conversation=obj.pk),
            admin_list_link(Sample, "samples", conversation=obj.pk),
        )

    @admin.action(description="Export selected as JSONL")
    def export_jsonl(
        self, request: HttpRequest, queryset: QuerySet[Conversation]
    ) -> StreamingHttpResponse:
        ordered = queryset.select_related("owner").order_by("pk")
        return jsonl_response(conversation_records(ordered), "conversations")


@admin.register(Message)
class MessageAdmin(ViewOnlyAdmin):
    list_display = (
        "pk",
        "conversation_link",
        "owner",
        "role",
        "turn_type",
        "status",
        "policy_version",
        "short_content",
        "created_at",
    )
    list_filter = ("role", "turn_type", "status", "policy_version", "created_at")
    search_fields = (
        "content",
        "conversation__owner__username",
        "conversation__external_session_id",
        "completion_id",
    )
    list_select_related = ("conversation__owner", "policy_version")
    raw_id_fields = ("conversation", "parent", "next_state", "policy_version")
    readonly_fields = (
        "conversation_link",
        "learning_links",
        "prompt_token_ids",
        "token_ids",
        "token_logprobs",
        "sampling_params_pretty",
        "usage",
        "completion_id",
        "created_at",
        "completed_at",
    )
    actions = ["rejudge"]

    @admin.display(description="conversation")
    def conversation_link(self, obj: Message) -> object:
        return admin_link(obj.conversation)

    @admin.display(description="owner", ordering="conversation__owner__username")
    def owner(self, obj: Message) -> str:
        return obj.conversation.owner.get_username()

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:80]

    @admin.display(description="sampling params")
    def sampling_params_pretty(self, obj: Message) -> object:
        return pretty_json(obj.sampling_params)

    @admin.display(description="learning")
    def learning_links(self, obj: Message) -> object:
        return format_html(
            "{} · {}",
            admin_list_link(Judgement, "judgements", message__id__exact=obj.pk),
            admin_list_link(Sample, "samples", message__id__exact=obj.pk),
        )

    def has_rejudge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("learning.change_judgement")

    @admin.action(description="Re-judge selected answers", permissions=["rejudge"])
    def rejudge(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        answers = list(queryset.select_related("conversation", "policy_version").order_by("pk"))
        rejudge_notice(request, self, answers)


@admin.register(Feedback)
class FeedbackAdmin(ViewOnlyAdmin):
    list_display = ("pk", "message_link", "author", "rating", "tags", "has_comment", "updated_at")
    list_filter = ("rating", "created_at", "updated_at")
    search_fields = ("comment", "correction", "author__username", "message__content")
    list_select_related = ("message", "author")
    raw_id_fields = ("message", "author")
    readonly_fields = ("message_link", "history_pretty", "created_at", "updated_at")
    exclude = ("history",)

    @admin.display(description="message")
    def message_link(self, obj: Feedback) -> object:
        return admin_link(obj.message)

    @admin.display(description="comment", boolean=True)
    def has_comment(self, obj: Feedback) -> bool:
        return bool(obj.comment or obj.correction)

    @admin.display(description="history")
    def history_pretty(self, obj: Feedback) -> object:
        return pretty_json(obj.history)
