"""JSONL export of conversations (with messages and feedback), judgements, samples, the
lineage they trained (policy versions and training updates, each with its owner: a username,
or null for the shared lineage), each person's memories with every text and state they had,
their settings and the share links of their conversations.

One JSON object per line, each with a ``type`` field; docs/learning.md documents every field.
Nothing is ever deleted by exporting.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from webapp.account.models import AccountSettings
from webapp.chat.feedback_spec import feedback_state
from webapp.chat.models import Conversation, Message
from webapp.learning.models import Comparison, Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.memory.models import Memory
from webapp.sharing.models import ShareLink


def _message(message: Message) -> dict[str, Any]:
    return {
        "id": message.pk,
        "parent_id": message.parent_id,
        "role": message.role,
        "content": message.content,
        "reasoning": message.reasoning,
        "tool_calls": message.tool_calls,
        "tool_call_id": message.tool_call_id,
        "turn_index": message.turn_index,
        "turn_type": message.turn_type,
        "selected": message.selected,
        "status": message.status,
        "policy_version": message.policy_version.number if message.policy_version else None,
        "completion_id": message.completion_id,
        "prompt_token_ids": message.prompt_token_ids,
        "token_ids": message.token_ids,
        "token_logprobs": message.token_logprobs,
        "memories": message.memories,
        "sampling_params": message.sampling_params,
        "finish_reason": message.finish_reason,
        "next_state_id": message.next_state_id,
        "created_at": message.created_at.isoformat(),
        "feedback": [
            {
                "author": f.author.get_username(),
                **feedback_state(f),
                "history": f.history,
                "updated_at": f.updated_at.isoformat(),
            }
            for f in message.feedback.all()
        ],
    }


def conversation_records(conversations: Iterable[Conversation]) -> Iterator[dict[str, Any]]:
    for conversation in conversations:
        messages = conversation.messages.select_related("policy_version").prefetch_related(
            "feedback__author"
        )
        yield {
            "type": "conversation",
            "id": conversation.pk,
            "owner": conversation.owner.get_username(),
            "title": conversation.title,
            "source": conversation.source,
            "external_session_id": conversation.external_session_id,
            "train_consent": conversation.train_consent,
            "created_at": conversation.created_at.isoformat(),
            "closed_at": conversation.closed_at.isoformat() if conversation.closed_at else None,
            "messages": [_message(m) for m in messages],
        }


def judgement_records(judgements: Iterable[Judgement]) -> Iterator[dict[str, Any]]:
    for j in judgements:
        yield {
            "type": "judgement",
            "id": j.pk,
            "message_id": j.message_id,
            "source": j.source,
            "score": j.score,
            "votes": j.votes,
            "hint": j.hint,
            "hint_votes": j.hint_votes,
            "judge_model": j.judge_model,
            "prompt_version": j.prompt_version,
            "next_state_text": j.next_state_text,
            "seconds": j.seconds,
            "created_at": j.created_at.isoformat(),
        }


def comparison_records(comparisons: Iterable[Comparison]) -> Iterator[dict[str, Any]]:
    for c in comparisons:
        yield {
            "type": "comparison",
            "id": c.pk,
            "disliked_message_id": c.disliked_id,
            "chosen_message_id": c.chosen_id,
            "created_at": c.created_at.isoformat(),
        }


def sample_records(samples: Iterable[Sample]) -> Iterator[dict[str, Any]]:
    for s in samples:
        yield {
            "type": "sample",
            "id": s.pk,
            "message_id": s.message_id,
            "judgement_id": s.judgement_id,
            "kind": s.kind,
            "reward": s.reward,
            "hint": s.hint,
            "correction": s.correction,
            "prompt_messages": s.prompt_messages,
            "prompt_token_ids": s.prompt_token_ids,
            "response_token_ids": s.response_token_ids,
            "response_logprobs": s.response_logprobs,
            "group_key": s.group_key,
            "policy_version": s.policy_version.number if s.policy_version else None,
            "status": s.status,
            "update_id": s.update_id,
            "created_at": s.created_at.isoformat(),
        }


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def _number(version: PolicyVersion | None) -> int | None:
    return version.number if version is not None else None


def _when(at: Any) -> str | None:
    return at.isoformat() if at else None


def version_records(versions: Iterable[PolicyVersion]) -> Iterator[dict[str, Any]]:
    for v in versions:
        yield {
            "type": "policy_version",
            "id": v.pk,
            "number": v.number,
            "owner": _username(v.owner),
            "parent": _number(v.parent),
            "status": v.status,
            "probe_metrics": v.probe_metrics,
            "created_at": v.created_at.isoformat(),
            "published_at": _when(v.published_at),
        }


def update_records(updates: Iterable[TrainingUpdate]) -> Iterator[dict[str, Any]]:
    for u in updates:
        yield {
            "type": "training_update",
            "id": u.pk,
            "owner": _username(u.owner),
            "algorithm": u.algorithm,
            "status": u.status,
            "base_version": _number(u.base_version),
            "produced_version": _number(u.produced_version),
            "config": u.config,
            "metrics": u.metrics,
            "summary": u.summary,
            "error": u.error,
            "created_at": u.created_at.isoformat(),
            "started_at": _when(u.started_at),
            "finished_at": _when(u.finished_at),
        }


def memory_records(memories: Iterable[Memory]) -> Iterator[dict[str, Any]]:
    for m in memories:
        yield {
            "type": "memory",
            "id": m.pk,
            "owner": _username(m.owner),
            "text": m.text,
            "state": m.state,
            "source": m.source,
            "source_message_id": m.source_message_id,
            "source_text": m.source_text,
            "learnt_in": _number(m.learnt_in),
            "created_at": m.created_at.isoformat(),
            "updated_at": m.updated_at.isoformat(),
            "revisions": [
                {"text": r.text, "state": r.state, "created_at": r.created_at.isoformat()}
                for r in m.revisions.all()
            ],
        }


def account_settings_records(rows: Iterable[AccountSettings]) -> Iterator[dict[str, Any]]:
    for a in rows:
        yield {
            "type": "account_settings",
            "owner": _username(a.user),
            "train_consent_default": a.train_consent_default,
            "temperature": a.temperature,  # null: the site's default
            "max_tokens": a.max_tokens,
            "updated_at": a.updated_at.isoformat(),
        }


def share_link_records(links: Iterable[ShareLink]) -> Iterator[dict[str, Any]]:
    for link in links:
        yield {
            "type": "share_link",
            "id": link.pk,
            "conversation_id": link.conversation_id,
            "path": link.get_absolute_url() if link.is_live else None,  # null: revoked
            "created_at": link.created_at.isoformat(),
            "revoked_at": _when(link.revoked_at),
        }


def export_all(*, owner: Any = None) -> Iterator[dict[str, Any]]:
    """Everything, or (``owner``) that user's conversations, what was made of them and their own
    lineage (the shared lineage's versions and updates are not theirs: they are left out)."""
    conversations = Conversation.objects.select_related("owner").order_by("pk")
    judgements = Judgement.objects.order_by("pk")
    comparisons = Comparison.objects.order_by("pk")
    samples = Sample.objects.select_related("policy_version").order_by("pk")
    versions = PolicyVersion.objects.select_related("owner", "parent").order_by("number")
    updates = TrainingUpdate.objects.select_related(
        "owner", "base_version", "produced_version"
    ).order_by("pk")
    memories = (
        Memory.objects.select_related("owner", "learnt_in")
        .prefetch_related("revisions")
        .order_by("pk")
    )
    settings_rows = AccountSettings.objects.select_related("user").order_by("pk")
    links = ShareLink.objects.order_by("pk")
    if owner is not None:
        settings_rows = settings_rows.filter(user=owner)
        links = links.filter(conversation__owner=owner)
        conversations = conversations.filter(owner=owner)
        judgements = judgements.filter(message__conversation__owner=owner)
        comparisons = comparisons.filter(disliked__conversation__owner=owner)
        samples = samples.filter(message__conversation__owner=owner)
        versions = versions.filter(owner=owner)
        updates = updates.filter(owner=owner)
        memories = memories.filter(owner=owner)
    yield from conversation_records(conversations.iterator(chunk_size=200))
    yield from judgement_records(judgements.iterator(chunk_size=500))
    yield from comparison_records(comparisons.iterator(chunk_size=500))
    yield from sample_records(samples.iterator(chunk_size=500))
    yield from version_records(versions.iterator(chunk_size=500))
    yield from update_records(updates.iterator(chunk_size=200))
    yield from memory_records(memories.iterator(chunk_size=200))
    yield from account_settings_records(settings_rows.iterator(chunk_size=200))
    yield from share_link_records(links.iterator(chunk_size=500))
