"""Recording what is sent to ``/v1/feedback``: the fields of ``feedback_spec``, by completion."""

from __future__ import annotations

from typing import Any

from webapp.api.errors import ApiError
from webapp.api.models import ApiKey
from webapp.api.schemas import bad
from webapp.chat.feedback import feedback_set
from webapp.chat.feedback_spec import FIELDS, FeedbackInvalid, check_changes
from webapp.chat.selectors import answer_get_by_completion

_NAMES = ", ".join(f"'{field.name}'" for field in FIELDS[:-1]) + f" or '{FIELDS[-1].name}'"


def _changes(body: dict[str, Any]) -> dict[str, Any]:
    changes = {field.name: body.get(field.name) for field in FIELDS}
    if all(value is None for value in changes.values()):
        raise bad(f"Send at least one of {_NAMES}.")
    try:
        check_changes(changes)
    except FeedbackInvalid as exc:
        raise bad(str(exc), exc.field) from exc
    return changes


def api_feedback_record(*, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    """Store the key owner's feedback on one of their completions; the response body."""
    completion_id = body.get("completion_id")
    if not isinstance(completion_id, str) or not completion_id:
        raise bad("'completion_id' is required: the 'id' of a chat completion.", "completion_id")
    changes = _changes(body)
    message = answer_get_by_completion(owner=key.owner, completion_id=completion_id)
    if message is None:
        raise ApiError(
            404,
            f"No completion '{completion_id}' for this key's user.",
            param="completion_id",
            code="completion_not_found",
        )
    try:
        feedback = feedback_set(message=message, author=key.owner, **changes)
    except FeedbackInvalid as exc:
        raise bad(str(exc), exc.field) from exc
    return {
        "object": "feedback",
        "completion_id": completion_id,
        **{field.name: getattr(feedback, field.name) for field in FIELDS},
    }
