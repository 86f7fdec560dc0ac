"""What a chosen alternative says without words: the form that set the chosen answer apart from
the one the person disliked (a list where there was prose, half the length, twice the length).

One choice is about one answer; the same difference in two of a person's comparisons is a
standing preference, proposed as a memory (``proposing.memories_propose_from_choices``).
Pure: the texts in, a difference's name out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

LIST_LINE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+\S", re.MULTILINE)
WORD = re.compile(r"\w+")

SHORTER_AT = 0.5
"""A chosen answer at most half the disliked one's words is "shorter"; twice or more "longer"."""
LONG_ENOUGH = 30
"""Words the longer of the two answers needs before their lengths say anything."""

MEMORY_TEXTS = {
    "list": "Use bullet points when an answer lists several things.",
    "shorter": "Keep answers short.",
    "longer": "Give detailed answers.",
}
"""The memory each difference proposes, in the person's own voice."""

OPPOSITES = {"shorter": "longer", "longer": "shorter"}
SEEN_TO_PROPOSE = 2
"""Comparisons (this one included) that must show the same difference before it is proposed."""


def _words(text: str) -> int:
    return len(WORD.findall(text))


def _is_list(text: str) -> bool:
    return len(LIST_LINE.findall(text)) >= 2


def form_difference(chosen: str, disliked: str) -> str | None:
    """The name of what sets ``chosen`` apart ("list", "shorter", "longer"), or None.

    >>> form_difference("- apples\\n- pears\\n- plums", "Apples, pears and plums.")
    'list'
    >>> form_difference("Paris.", " ".join(["word"] * 40))
    'shorter'
    >>> form_difference(" ".join(["word"] * 40), "Paris, of course.")
    'longer'
    >>> form_difference("Paris is the capital.", "The capital is Paris.") is None
    True
    """
    if _is_list(chosen) and not _is_list(disliked):
        return "list"
    mine, theirs = _words(chosen), _words(disliked)
    if max(mine, theirs) < LONG_ENOUGH or not mine or not theirs:
        return None
    if mine <= SHORTER_AT * theirs:
        return "shorter"
    if theirs <= SHORTER_AT * mine:
        return "longer"
    return None


def standing_difference(differences: Sequence[str | None]) -> str | None:
    """The difference of the newest choice (``differences[0]``, then earlier ones) when the
    person's choices show it often enough and never its opposite.

    >>> standing_difference(["shorter", None, "shorter"])
    'shorter'
    >>> standing_difference(["shorter", "longer", "shorter"]) is None
    True
    >>> standing_difference(["list"]) is None
    True
    """
    newest = differences[0] if differences else None
    if newest is None or OPPOSITES.get(newest) in differences:
        return None
    return newest if differences.count(newest) >= SEEN_TO_PROPOSE else None
