"""What an answer is judged on, as a fingerprint: the judge's idempotency key and the chat's way
of telling whether the judge has read the newest feedback yet.

An answer's evidence is its next state (the message that followed it), whether the
conversation ended after it, and its owner's feedback. ``judgement_record`` keeps one
judgement per fingerprint; the chat's learning status compares the fingerprint of the evidence
as it stands with the judgements made, so it can say "Parley is reading it" until the judge
catches up instead of showing what an older judgement made of older feedback.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from trainer.judge import feedback_hint, is_useful_hint
from webapp.chat.feedback_spec import feedback_state


def feedback_user_hint(feedback: Any) -> str | None:
    """The hint a person's own feedback gives (its comment, else its correction, with its reason
    tags), or None when it gives none worth training on."""
    if feedback is None:
        return None
    hint = feedback_hint(
        comment=feedback.comment, correction=feedback.correction, tags=feedback.tags
    )
    return hint if is_useful_hint(hint) else None


def evidence_facts(
    *, next_state_id: int | None, feedback: Any, conversation_end: bool = False
) -> dict[str, Any]:
    """The evidence an answer is judged on. The conversation's end counts only when nothing
    else does: an answer the user rated or commented on is judged on that, once, however the
    conversation closed."""
    rating = feedback.rating if feedback is not None else 0
    user_hint = feedback_user_hint(feedback)
    correction = feedback.correction if feedback is not None else ""
    return {
        "next": next_state_id,
        "end": conversation_end and not (next_state_id or rating or user_hint or correction),
        "rating": rating,
        "hint": user_hint,
        **feedback_state(feedback),
    }


def evidence_fingerprint(facts: dict[str, Any]) -> str:
    """The fingerprint of ``evidence_facts``: one judgement per fingerprint and answer."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def has_evidence(facts: dict[str, Any]) -> bool:
    """Something for the judge to read: a next state, a rating, a hint, a correction or a
    comment (a comment too short to be a hint is still read, as what the user said next), or
    the conversation's end."""
    return any(facts[key] for key in ("next", "end", "rating", "hint", "correction", "comment"))
