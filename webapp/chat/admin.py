"""Admin for conversations, messages and feedback: declarative, read-mostly (services write)."""

from __future__ import annotations

from django.contrib import admin

from webapp.chat.models import Conversation, Feedback, Message


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("role", "status", "turn_index", "selected", "policy_version", "content")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "source", "train_consent", "last_activity_at", "closed_at")
    list_filter = ("source", "train_consent")
    search_fields = ("title", "owner__username", "external_session_id")
    raw_id_fields = ("owner", "api_key")
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("pk", "conversation", "role", "status", "policy_version", "created_at")
    list_filter = ("role", "status", "turn_type", "policy_version")
    search_fields = ("content",)
    raw_id_fields = ("conversation", "parent", "next_state")
    readonly_fields = ("prompt_token_ids", "token_ids", "token_logprobs", "usage", "completion_id")


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ("message", "author", "rating", "tags", "updated_at")
    list_filter = ("rating",)
    search_fields = ("comment", "correction", "author__username")
    raw_id_fields = ("message", "author")
    readonly_fields = ("history",)
