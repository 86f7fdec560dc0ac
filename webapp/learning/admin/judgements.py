"""Judgements: the judge's votes and hint for an answer; re-judge and export actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils.html import format_html, format_html_join

from webapp.chat.models import Message
from webapp.core.admin_helpers import (
    EMPTY,
    admin_link,
    jsonl_response,
)
from webapp.learning.admin.common import (
    ConversationFilter,
    ViewOnlyAdmin,
    rejudge_notice,
    sample_of,
)
from webapp.learning.export import judgement_records
from webapp.learning.models import Judgement


def _votes_table(votes: list[Any]) -> object:
    """Each vote's score and raw text (hint votes are plain strings)."""
    if not votes:
        return EMPTY
    rows = (
        (i + 1, vote_score_label(v) if isinstance(v, dict) else "", _vote_text(v))
        for i, v in enumerate(votes)
    )
    return format_html(
        "<table><thead><tr><th>#</th><th>score</th><th>text</th></tr></thead><tbody>{}</tbody>"
        "</table>",
        format_html_join(
            "",
            '<tr><td>{}</td><td>{}</td><td style="white-space: pre-wrap">{}</td></tr>',
            rows,
        ),
    )


def vote_score_label(vote: dict[str, Any]) -> str:
    """The vote's score as "+1", "-1" or "+0", or "?" when it did not parse (score None)."""
    score = vote.get("score")
    return f"{score:+d}" if isinstance(score, int) else "?"


def _vote_text(vote: Any) -> str:
    return str(vote.get("text", "")) if isinstance(vote, dict) else str(vote)


@admin.register(Judgement)
class JudgementAdmin(ViewOnlyAdmin):
    list_display = (
        "id",
        "message_link",
        "conversation_link",
        "source",
        "score",
        "votes_summary",
        "has_hint",
        "sample_status",
        "judge_model",
        "created_at",
    )
    list_filter = (
        "source",
        "score",
        "judge_model",
        "prompt_version",
        "created_at",
        ConversationFilter,
    )
    search_fields = (
        "message__content",
        "hint",
        "next_state_text",
        "message__conversation__owner__username",
        "message__conversation__external_session_id",
    )
    # The admin applies list_select_related only to a queryset that selects nothing yet, so
    # the whole chain the list shows is named here rather than in get_queryset.
    list_select_related = ("message__conversation", "sample__update__produced_version")
    fields = (
        "message_link",
        "conversation_link",
        "sample_link",
        "update_link",
        "version_link",
        "source",
        "score",
        "votes_table",
        "hint",
        "hint_votes_table",
        "next_state_text",
        "judge_model",
        "prompt_version",
        "fingerprint",
        "seconds",
        "created_at",
    )
    readonly_fields = fields
    actions = ["export_jsonl", "rejudge"]

    @admin.display(description="message")
    def message_link(self, obj: Judgement) -> object:
        return admin_link(obj.message)

    @admin.display(description="conversation")
    def conversation_link(self, obj: Judgement) -> object:
        return admin_link(obj.message.conversation)

    @admin.display(description="sample")
    def sample_link(self, obj: Judgement) -> object:
        return admin_link(sample_of(obj))

    @admin.display(description="consumed by update")
    def update_link(self, obj: Judgement) -> object:
        sample = sample_of(obj)
        return admin_link(sample.update if sample else None)

    @admin.display(description="produced version")
    def version_link(self, obj: Judgement) -> object:
        sample = sample_of(obj)
        update = sample.update if sample else None
        return admin_link(update.produced_version if update else None)

    @admin.display(description="votes")
    def votes_summary(self, obj: Judgement) -> str:
        return " ".join(vote_score_label(v) for v in obj.votes if isinstance(v, dict)) or EMPTY

    @admin.display(description="hint", boolean=True)
    def has_hint(self, obj: Judgement) -> bool:
        return bool(obj.hint)

    @admin.display(description="sample")
    def sample_status(self, obj: Judgement) -> str:
        sample = sample_of(obj)
        return sample.status if sample else EMPTY

    @admin.display(description="votes (score and text)")
    def votes_table(self, obj: Judgement) -> object:
        return _votes_table(obj.votes)

    @admin.display(description="hint votes")
    def hint_votes_table(self, obj: Judgement) -> object:
        return _votes_table(obj.hint_votes)

    @admin.action(description="Export selected as JSONL")
    def export_jsonl(
        self, request: HttpRequest, queryset: QuerySet[Judgement]
    ) -> StreamingHttpResponse:
        return jsonl_response(judgement_records(queryset.order_by("pk")), "judgements")

    def has_rejudge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("learning.change_judgement")

    @admin.action(
        description="Re-judge the answers of the selected judgements", permissions=["rejudge"]
    )
    def rejudge(self, request: HttpRequest, queryset: QuerySet[Judgement]) -> None:
        answers = Message.objects.filter(pk__in=queryset.values("message_id"))
        rejudge_notice(
            request, self, list(answers.select_related("conversation", "policy_version"))
        )
