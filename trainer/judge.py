"""The process-reward judge: prompts, vote parsing, majority vote, hindsight hints. Pure Python.

The judge sees the user's request, the assistant's answer and the *next state* (what the user
or a tool said next) and ends its reply with ``\\boxed{1}``, ``\\boxed{-1}`` or ``\\boxed{0}``.
m such votes are taken; the majority wins, and ties or unparseable votes give 0, so a confused
judge never invents a reward. Separately, m hindsight hints are asked for between
``[HINT_START]`` and ``[HINT_END]``; the longest non-trivial one wins.

>>> parse_vote("The answer ignored the request. \\\\boxed{-1}")
-1
>>> majority([1, 1, -1])
1
>>> majority([1, -1, None])
0
>>> select_hint(["ok", "Start the answer with 'Sure!' and keep it short."])
"Start the answer with 'Sure!' and keep it short."
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

PROMPT_VERSION = "prm-v1"
MIN_HINT_CHARS = 10
TRIVIAL_HINTS = {
    "ok",
    "okay",
    "wrong",
    "bad",
    "good",
    "no",
    "yes",
    "thanks",
    "thank you",
    "fine",
    "nice",
    "great",
    "incorrect",
    "correct",
    "none",
    "n/a",
    "nothing",
    "no hint",
    "not helpful",
}
_BOXED = re.compile(r"\\boxed\{\s*([+-]?\d+)\s*\}")
_HINT = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.DOTALL)

JUDGE_SYSTEM = (
    "You are a strict evaluator of an AI assistant. You see the user's request, the assistant's "
    "answer, and what happened next (the user's next message or a tool result). Decide whether "
    "the answer served the user well, using the next state as evidence: a satisfied follow-up "
    "is good, a correction, complaint or repeated request is bad."
)
HINT_SYSTEM = (
    "You improve an AI assistant. From the user's request, the assistant's answer and what the "
    "user said next, write one short, concrete instruction that would have made the answer "
    "better (for example: 'Start with a one-line summary.'). If nothing would have helped, "
    "write NONE."
)


def build_prm_messages(*, request: str, answer: str, next_state: str) -> list[dict[str, str]]:
    """The judge prompt; it contains the request, the answer and the next state verbatim."""
    user = (
        f"## User request\n{request}\n\n## Assistant answer\n{answer}\n\n"
        f"## What happened next\n{next_state}\n\n"
        "Was the answer good? Think briefly, then end with exactly one of "
        "\\boxed{1} (good), \\boxed{-1} (bad) or \\boxed{0} (unclear)."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def build_hint_messages(*, request: str, answer: str, next_state: str) -> list[dict[str, str]]:
    user = (
        f"## User request\n{request}\n\n## Assistant answer\n{answer}\n\n"
        f"## What the user said next\n{next_state}\n\n"
        "Write the instruction between [HINT_START] and [HINT_END]."
    )
    return [{"role": "system", "content": HINT_SYSTEM}, {"role": "user", "content": user}]


def parse_vote(text: str) -> int | None:
    """The last ``\\boxed{...}`` in ``text`` as +1, -1 or 0; None when there is none valid."""
    found = _BOXED.findall(text or "")
    if not found:
        return None
    value = int(found[-1])
    return value if value in (-1, 0, 1) else None


def majority(votes: Iterable[int | None]) -> int:
    """Majority of the votes; unparseable votes count as 0, and a tie gives 0."""
    counts = Counter(0 if vote is None else vote for vote in votes)
    if not counts:
        return 0
    ranked = counts.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return 0
    return ranked[0][0]


def extract_hint(text: str) -> str | None:
    """The text between the last [HINT_START]/[HINT_END] pair, trimmed; None if absent."""
    found = _HINT.findall(text or "")
    return found[-1].strip() if found else None


def is_useful_hint(hint: str | None) -> bool:
    if not hint:
        return False
    cleaned = hint.strip()
    normalised = re.sub(r"[^\w\s/]", "", cleaned.lower()).strip()
    return len(cleaned) >= MIN_HINT_CHARS and normalised not in TRIVIAL_HINTS


def select_hint(candidates: Iterable[str | None]) -> str | None:
    """The longest useful hint of the candidates, or None."""
    useful = [c.strip() for c in candidates if is_useful_hint(c)]
    return max(useful, key=len) if useful else None


def feedback_hint(*, comment: str, correction: str, tags: Iterable[str]) -> str | None:
    """A user's own words as a hint: the comment (or else the correction), with reason tags."""
    text = comment.strip() or correction.strip()
    tag_list = [t for t in tags if t]
    if tag_list:
        reasons = "Reasons: " + ", ".join(tag_list) + "."
        text = f"{text} ({reasons})" if text else reasons
    return text or None
