"""The learning loop's records in words a newcomer understands: why a version was not used (the
gate's reasons), why feedback is not trained, what taught a version, why an update stopped.

The records themselves keep the technical wording (figures, thresholds, judgement ids); pages
show these words first and the record behind a "details" disclosure. Each function takes
what is stored, including records written before a wording existed, and falls back to a
general sentence rather than showing a raw one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from webapp.learning.models import Sample
from webapp.learning.secret_guard import holds_secret

GENERAL_REFUSAL = "it did not pass Parley's quality checks"

_KIND_WORDS = {
    "empty": "empty answers",
    "repeating": "answers that repeat themselves",
    "cut off": "answers that stop mid-sentence",
    "cut_off": "answers that stop mid-sentence",
    "language switch": "answers in the wrong language",
    "language_switch": "answers in the wrong language",
}

# (pattern over a reason the gate recorded, the words for it); the first that matches wins.
_REFUSALS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), words)
    for pattern, words in (
        (r"^probe KL", "it changed too much at once from the version answering you"),
        (r"^probe (?:perplexity|ppl)", "its language got clumsier than the starting model's"),
        (
            r"^the newest feedback",
            "it did worse than the version answering you on your newest feedback",
        ),
        (
            r"^held-back feedback",
            "it did worse than the version answering you on feedback you gave earlier",
        ),
        (
            r"samples were deleted by their owners",
            "a conversation it learnt from was deleted while it trained, so it was set aside",
        ),
    )
)
_PROBE_KIND = re.compile(r"^\d+ (?P<kind>[a-z_ ]+?) probe answers")
_HELD_BACK_KIND = re.compile(r"^\d+ (?P<kind>[a-z_ ]+?) answers to \d+ held-back prompts")


def refusal_words(reason: str) -> str:
    """One reason the gate recorded, in plain words.

    >>> refusal_words("probe KL to the live version 0.9 exceeds 0.5")
    'it changed too much at once from the version answering you'
    >>> refusal_words("3 repeating probe answers (base: 0)")
    'it gave answers that repeat themselves to test questions'
    >>> refusal_words("something new")
    "it did not pass Parley's quality checks"
    """
    for pattern, words in _REFUSALS:
        if pattern.search(reason):
            return words
    if match := _PROBE_KIND.match(reason):
        kind = _KIND_WORDS.get(match["kind"], "broken answers")
        return f"it gave {kind} to test questions"
    if match := _HELD_BACK_KIND.match(reason):
        kind = _KIND_WORDS.get(match["kind"], "broken answers")
        return f"it gave {kind} to questions you asked before"
    return GENERAL_REFUSAL


def refusals_words(reasons: Iterable[str]) -> list[str]:
    """Each distinct reason in plain words, in order; the general sentence when none was
    recorded."""
    out: list[str] = []
    for reason in reasons:
        words = refusal_words(str(reason))
        if words not in out:
            out.append(words)
    return out or [GENERAL_REFUSAL]


def exclusion_words(sample: Sample) -> str:
    """Why a sample that is not waiting will never be trained, in plain words."""
    reason = sample.exclusion_reason
    if sample.status == Sample.Status.SUPERSEDED:
        if "withdrawn" in reason:
            return "you withdrew the feedback"
        if "chosen over" in reason:
            return "you chose it over an answer you disliked: learnt from that choice instead"
        return "replaced by your newer feedback on the same answer"
    if reason.startswith("refused by the probe gate"):
        return "the versions that learnt from it did not pass the checks, too often"
    if "admin" in reason:
        return "set aside by an administrator"
    if holds_secret(reason):
        kinds = reason.partition(": ")[2]
        return (
            f"not learnt from: the conversation holds what looks like a secret ({kinds}), "
            "and Parley never trains on one"
        )
    return "set aside"


def waiting_words(sample: Sample, *, paused: bool) -> str:
    """Why a ready sample is still waiting, in plain words (``unused_reason``: set by
    ``mymodel.selectors.samples_not_trained`` when the configured training never uses it)."""
    if getattr(sample, "unused_reason", ""):
        return "kept, but the training Parley uses now does not learn from this kind"
    if paused:
        return "learning is paused"
    if sample.refusals:
        return "a version learnt from it but did not pass the checks; it will be tried again"
    return "waits for the next update"


_TAUGHT = (
    ("up", "👍", "👍"),
    ("down", "👎", "👎"),
    ("comments", "comment", "comments"),
    ("corrections", "correction", "corrections"),
    ("next_state", "reply read by Parley", "replies read by Parley"),
    ("chosen", "answer chosen over a 👎", "answers chosen over a 👎"),
)


def taught_words(counts: dict[str, int]) -> str:
    """What taught a version, as a list: "2 👍, 1 correction and 3 replies read by Parley";
    "" when nothing is recorded.

    >>> taught_words({"up": 2, "corrections": 1, "next_state": 3})
    '2 👍, 1 correction and 3 replies read by Parley'
    """
    parts = [
        f"{n} {one if n == 1 else many}"
        for key, one, many in _TAUGHT
        if (n := int(counts.get(key, 0) or 0)) > 0
    ]
    if len(parts) > 1:
        return ", ".join(parts[:-1]) + " and " + parts[-1]
    return parts[0] if parts else ""


def failure_words(error: str) -> str:
    """Why an update stopped without a version, in plain words."""
    if "paused" in error:
        return "learning was paused before it started"
    if "No ready sample" in error:
        return "the feedback it was to learn from had changed before it started"
    return "something went wrong while it trained"
