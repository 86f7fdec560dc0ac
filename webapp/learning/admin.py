"""Admin for the learning loop: judgements, samples, training updates and policy versions.

These rows are written only by the loop's services, so their pages are view-only (nothing is
wiped: no deletes either). What an admin may do is an action that calls a service: export as
JSONL, exclude a sample from training, re-judge, publish / roll back to a version. Every page
links along the chain sample → message → conversation → judgement → the update that consumed
the sample → the version that update produced.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils.html import format_html, format_html_join

from webapp.chat.admin import rejudge_notice
from webapp.chat.models import Message
from webapp.core.admin_helpers import (
    EMPTY,
    admin_link,
    admin_list_link,
    jsonl_response,
    pretty_json,
    table,
)
from webapp.learning.export import judgement_records, sample_records
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.services import sample_exclude
from webapp.learning.training import PublishFailed, policy_version_publish

STEP_COLUMNS = (
    "step",
    "loss",
    "pg_loss",
    "kl",
    "clip_fraction",
    "sft_loss",
    "mean_advantage",
    "grad_norm",
    "tokens",
    "tokens_per_second",
    "seconds",
)


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


class ViewOnlyAdmin(admin.ModelAdmin):
    """Rows the learning loop writes: admins look and act (actions), never edit or delete."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


def _sample_of(judgement: Judgement) -> Sample | None:
    try:
        return judgement.sample
    except Sample.DoesNotExist:
        return None


def _produced_by(version: PolicyVersion) -> TrainingUpdate | None:
    try:
        return version.produced_by
    except TrainingUpdate.DoesNotExist:
        return None


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
    """ "+1", "-1", "+0", or "?" for a vote that did not parse (stored with score None)."""
    score = vote.get("score")
    return f"{score:+d}" if isinstance(score, int) else "?"


def _vote_text(vote: Any) -> str:
    return str(vote.get("text", "")) if isinstance(vote, dict) else str(vote)


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ViewOnlyAdmin):
    list_display = (
        "label",
        "status",
        "parent",
        "probe_kl",
        "probe_ppl",
        "produced_by_link",
        "created_at",
        "published_at",
    )
    list_filter = ("status", "created_at", "published_at")
    search_fields = ("adapter_path",)
    list_select_related = ("parent", "produced_by")
    fields = (
        "number",
        "status",
        "adapter_path",
        "parent_link",
        "produced_by_link",
        "probe_table",
        "chain_links",
        "created_at",
        "published_at",
    )
    readonly_fields = fields
    actions = ["make_live"]

    @admin.display(description="probe KL")
    def probe_kl(self, obj: PolicyVersion) -> Any:
        return obj.probe_metrics.get("probe_kl", EMPTY)

    @admin.display(description="probe ppl")
    def probe_ppl(self, obj: PolicyVersion) -> Any:
        return obj.probe_metrics.get("probe_ppl", EMPTY)

    @admin.display(description="parent")
    def parent_link(self, obj: PolicyVersion) -> object:
        return admin_link(obj.parent)

    @admin.display(description="produced by")
    def produced_by_link(self, obj: PolicyVersion) -> object:
        return admin_link(_produced_by(obj))

    @admin.display(description="probe metrics")
    def probe_table(self, obj: PolicyVersion) -> object:
        rows = [{"metric": k, "value": v} for k, v in sorted(obj.probe_metrics.items())]
        return table(rows, ("metric", "value"))

    @admin.display(description="related")
    def chain_links(self, obj: PolicyVersion) -> object:
        links = [
            admin_list_link(Message, "answers it served", policy_version__id__exact=obj.pk),
            admin_list_link(Sample, "samples from its answers", policy_version__id__exact=obj.pk),
        ]
        update = _produced_by(obj)
        if update is not None:
            links.append(
                admin_list_link(Sample, "samples trained into it", update__id__exact=update.pk)
            )
        return format_html_join(" · ", "{}", ((link,) for link in links))

    def has_publish_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("learning.change_policyversion")

    @admin.action(description="Roll back to / publish this version", permissions=["publish"])
    def make_live(self, request: HttpRequest, queryset: QuerySet[PolicyVersion]) -> None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one version.", level=messages.ERROR)
            return
        version = queryset.get()
        try:
            policy_version_publish(version=version)
        except PublishFailed as exc:
            self.message_user(request, f"Not published: {exc}", level=messages.ERROR)
            return
        self.message_user(request, f"{version.label} is live on every serving replica.")


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
        return admin_link(_sample_of(obj))

    @admin.display(description="consumed by update")
    def update_link(self, obj: Judgement) -> object:
        sample = _sample_of(obj)
        return admin_link(sample.update if sample else None)

    @admin.display(description="produced version")
    def version_link(self, obj: Judgement) -> object:
        sample = _sample_of(obj)
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
        sample = _sample_of(obj)
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


@admin.register(Sample)
class SampleAdmin(ViewOnlyAdmin):
    list_display = (
        "id",
        "message_link",
        "conversation_link",
        "kind",
        "reward",
        "status",
        "policy_version",
        "update_link",
        "version_link",
        "created_at",
    )
    list_filter = (
        "kind",
        "status",
        "reward",
        "policy_version",
        "created_at",
        "consumed_at",
        ConversationFilter,
    )
    search_fields = (
        "hint",
        "correction",
        "message__content",
        "message__conversation__owner__username",
        "message__conversation__external_session_id",
    )
    list_select_related = ("message__conversation", "policy_version", "update__produced_version")
    fields = (
        "message_link",
        "conversation_link",
        "judgement_link",
        "update_link",
        "version_link",
        "kind",
        "status",
        "reward",
        "hint",
        "correction",
        "policy_version",
        "group_key",
        "prompt_messages_pretty",
        "prompt_token_ids",
        "response_token_ids",
        "response_logprobs",
        "created_at",
        "consumed_at",
    )
    readonly_fields = fields
    actions = ["export_jsonl", "exclude_from_training"]

    @admin.display(description="message")
    def message_link(self, obj: Sample) -> object:
        return admin_link(obj.message, f"#{obj.message_id}")

    @admin.display(description="conversation")
    def conversation_link(self, obj: Sample) -> object:
        return admin_link(obj.message.conversation)

    @admin.display(description="judgement")
    def judgement_link(self, obj: Sample) -> object:
        return admin_link(obj.judgement)

    @admin.display(description="consumed by update")
    def update_link(self, obj: Sample) -> object:
        return admin_link(obj.update, f"#{obj.update_id}" if obj.update_id else None)

    @admin.display(description="produced version")
    def version_link(self, obj: Sample) -> object:
        return admin_link(obj.update.produced_version if obj.update else None)

    @admin.display(description="prompt messages")
    def prompt_messages_pretty(self, obj: Sample) -> object:
        return pretty_json(obj.prompt_messages)

    @admin.action(description="Export selected as JSONL")
    def export_jsonl(
        self, request: HttpRequest, queryset: QuerySet[Sample]
    ) -> StreamingHttpResponse:
        samples = queryset.select_related("policy_version").order_by("pk")
        return jsonl_response(sample_records(samples), "samples")

    def has_exclude_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("learning.change_sample")

    @admin.action(description="Exclude from training", permissions=["exclude"])
    def exclude_from_training(self, request: HttpRequest, queryset: QuerySet[Sample]) -> None:
        excluded = 0
        for sample in queryset:
            was_ready = sample.status == Sample.Status.READY
            sample_exclude(sample=sample)
            excluded += was_ready
        skipped = queryset.count() - excluded
        note = f"; {skipped} were not ready (consumed ones stay as trained)" if skipped else ""
        self.message_user(request, f"Excluded {excluded} ready sample(s){note}.")


@admin.register(TrainingUpdate)
class TrainingUpdateAdmin(ViewOnlyAdmin):
    list_display = (
        "id",
        "algorithm",
        "status",
        "base_version",
        "produced_version",
        "sample_count",
        "last_loss",
        "created_at",
        "finished_at",
    )
    list_filter = ("status", "algorithm", "base_version", "created_at", "finished_at")
    search_fields = ("error", "algorithm")
    list_select_related = ("base_version", "produced_version")
    fields = (
        "algorithm",
        "status",
        "base_version_link",
        "produced_version_link",
        "samples_link",
        "config_pretty",
        "metrics_table",
        "summary_pretty",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[TrainingUpdate]:
        return super().get_queryset(request).annotate(sample_total=Count("samples"))

    @admin.display(description="samples", ordering="sample_total")
    def sample_count(self, obj: TrainingUpdate) -> int:
        return obj.sample_total  # type: ignore[attr-defined]

    @admin.display(description="last loss")
    def last_loss(self, obj: TrainingUpdate) -> str:
        losses = [m["loss"] for m in obj.metrics if isinstance(m, dict) and "loss" in m]
        return f"{losses[-1]:.4g}" if losses else EMPTY

    @admin.display(description="base version")
    def base_version_link(self, obj: TrainingUpdate) -> object:
        return admin_link(obj.base_version)

    @admin.display(description="produced version")
    def produced_version_link(self, obj: TrainingUpdate) -> object:
        return admin_link(obj.produced_version)

    @admin.display(description="samples")
    def samples_link(self, obj: TrainingUpdate) -> object:
        return admin_list_link(Sample, "samples it consumed", update__id__exact=obj.pk)

    @admin.display(description="config")
    def config_pretty(self, obj: TrainingUpdate) -> object:
        return pretty_json(obj.config)

    @admin.display(description="metrics per step")
    def metrics_table(self, obj: TrainingUpdate) -> object:
        steps = [m for m in obj.metrics if isinstance(m, dict) and "step" in m]
        present = {key for step in steps for key in step}
        return table(steps, [c for c in STEP_COLUMNS if c in present])

    @admin.display(description="summary")
    def summary_pretty(self, obj: TrainingUpdate) -> object:
        return pretty_json(obj.summary)
