"""The one description of the feedback a person can give on an answer.

Every place that knows what feedback is derives it from ``FIELDS`` here: the page's form, the
``/v1/feedback`` API (its parsing and its OpenAPI schema), the checks in ``feedback_set``,
``Feedback.history``, ``Feedback.is_empty``, the export and the judging fingerprint. A new kind
of feedback (say an emoji reaction that becomes a reward) is a new entry here, a model field
with its migration, a button in ``templates/chat/_feedback.html`` and the line in the judging
that turns it into a reward.

Reason tags are not listed here: they are offered per thumb (``FEEDBACK_TAGS_UP``/``_DOWN`` in
settings), on the page only, and are part of the recorded state (``STATE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_FEEDBACK_TEXT = 20_000


class FeedbackInvalid(ValueError):
    """Feedback that cannot be stored as given; str() says why, ``field`` names the field."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Choice:
    value: int
    label: str  # what the page shows
    meaning: str  # what the API documents


@dataclass(frozen=True)
class FeedbackField:
    """One thing a person can say about an answer: a choice of values, or free text."""

    name: str
    description: str
    choices: tuple[Choice, ...] = ()
    max_length: int = MAX_FEEDBACK_TEXT

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(choice.value for choice in self.choices)

    @property
    def empty(self) -> int | str:
        return 0 if self.choices else ""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` cannot be stored in this field, or None when it can."""
        if self.choices:
            # bool is an int in Python: True must not pass for 1.
            if isinstance(value, bool) or value not in self.values:
                allowed = ", ".join(f"{c.value} ({c.label})" for c in self.choices[:-1])
                last = self.choices[-1]
                return f"'{self.name}' must be {allowed} or {last.value} ({last.meaning})."
            return None
        if not isinstance(value, str):
            return f"'{self.name}' must be a string."
        if len(value) > self.max_length:
            return f"{self.name} is longer than {self.max_length} characters"
        return None

    def openapi(self) -> dict[str, Any]:
        if self.choices:
            meanings = "; ".join(f"{c.value}: {c.meaning}" for c in self.choices)
            return {
                "type": "integer",
                "enum": list(self.values),
                "description": f"{self.description} ({meanings})",
            }
        return {"type": "string", "maxLength": self.max_length, "description": self.description}


RATING = FeedbackField(
    "rating",
    "The thumb",
    choices=(
        Choice(1, "👍", "good answer"),
        Choice(-1, "👎", "bad answer"),
        Choice(0, "none", "withdraw"),
    ),
)
FIELDS: tuple[FeedbackField, ...] = (
    RATING,
    FeedbackField("comment", "What was good or bad about the answer"),
    FeedbackField("correction", "The answer the user wanted"),
)
BY_NAME = {field.name: field for field in FIELDS}
# The recorded state of one person's feedback: what history keeps, export writes, the judge's
# fingerprint covers and what is empty when all of it is.
STATE: tuple[str, ...] = (*BY_NAME, "tags")


def feedback_state(feedback: Any) -> dict[str, Any]:
    """The state of a ``Feedback`` (or of none: every field empty)."""
    if feedback is None:
        return {**{f.name: f.empty for f in FIELDS}, "tags": []}
    return {name: getattr(feedback, name) for name in STATE}


def check_changes(changes: dict[str, Any]) -> None:
    """Raise FeedbackInvalid unless every given (not None) change fits its field."""
    for name, value in changes.items():
        field = BY_NAME.get(name)
        if field is None:
            raise FeedbackInvalid(f"unknown feedback field {name!r}")
        problem = None if value is None else field.problem(value)
        if problem:
            raise FeedbackInvalid(problem, field=name)


def openapi_properties() -> dict[str, Any]:
    return {field.name: field.openapi() for field in FIELDS}
