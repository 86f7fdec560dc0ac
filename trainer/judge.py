"""The process-reward judge: prompts, vote parsing, majority vote, hindsight hints. Pure Python.

The judge sees the user's request, the assistant's answer and the *next state* (what the user
or a tool said next) and votes +1, -1 or 0 as a text ending in ``\\boxed{...}``. Two judges:

- ``cues`` (the default) reads the next state for corrections, complaints, thanks and tool
  errors (trainer/judge_cues.py): no model, one vote, always parseable.
- ``hindsight`` scores like ``cues`` and takes the user's follow-up itself, framed, as the hint
  (``trainer.hindsight``), whatever the score: no keyword list decides what is learnt.
- ``llm`` asks an OpenAI-compatible model for m votes; on vLLM the reply is constrained to
  the three boxes (structured outputs), so every vote parses there too.

Unparseable votes are left out of the majority; a tie, or no parseable vote, gives 0, so a
confused judge never invents a reward. A hindsight hint is asked for only when the score says
the answer needed one (-1), and taken only when the judge says it is needed (``\\boxed{1}``
before ``[HINT_START] ... [HINT_END]``, as in OpenClaw-RL), says something (not "no hint
needed", not praise, at least 10 characters, not trivial), carries no prompt-template debris and
is grounded in what the user or the tool said next. The longest such hint wins.

>>> parse_vote("The answer ignored the request. \\\\boxed{-1}")
-1
>>> majority([1, 1, -1])
1
>>> majority([1, -1, None])
0
>>> majority([None, None, 1])
1
>>> select_hint(["ok", "\\\\boxed{1} [HINT_START]Start the answer with 'Sure!'.[HINT_END]"],
...             evidence="[user] Please start with 'Sure!' as I asked.")
"Start the answer with 'Sure!'."
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from trainer.hindsight import HINDSIGHT_VERSION, followup_text, hindsight_hint
from trainer.judge_cues import cue_hint, cue_vote, score_from_cues, split_next_state, text_cues

PROMPT_VERSION = "prm-v2"  # the LLM judge's prompts
# The cue judge's rules (v2: hints without the complaint around them; v3: German, Chinese,
# French and Spanish cues, requests to change the answer's form or content count as -1).
CUES_VERSION = "cues-v5"
JUDGE_KINDS = ("cues", "hindsight", "llm")
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
    "danke",
    "nein",
    "falsch",
    "merci",
    "gracias",
    "谢谢",
    "不对",
    "错了",
    "好的",
}
# The only replies an LLM judge may give on vLLM (structured outputs): each one parses.
VOTE_CHOICES = ("\\boxed{1}", "\\boxed{-1}", "\\boxed{0}")
_BOXED = re.compile(r"\\boxed\{\s*([+-]?\d+)\s*\}")
_HINT = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.DOTALL)
_NO_HINT = re.compile(
    r"\bno (further |more )?(hint|change|improvement|instruction)s? (is |are |was |were )?"
    r"(needed|necessary|required)\b|\bnothing (needs|needed|has) to (be )?(change|improve)"
    r"|\bnothing would have helped\b|\b(answer|response|reply) (was|is) (already )?"
    r"(perfect|fine|good|correct|great)\b",
    re.IGNORECASE,
)
# Prompt-template debris a small model writes on past its answer ("### Instruction", role tags).
_DEBRIS = re.compile(
    r"###|\[/?HINT_|<\|[a-z_]+\|>|^\s*(instruction|response|user|assistant|system)\s*:",
    re.IGNORECASE | re.MULTILINE,
)
_CONTENT_WORD = re.compile(r"[^\W_\u3400-\u9fff]{4,}")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")

JUDGE_SYSTEM = (
    "You are a strict evaluator of an AI assistant. You see the user's request, the assistant's "
    "answer, and what happened next (the user's next message or a tool result). Decide whether "
    "the answer served the user well, using the next state as evidence: thanks or approval is "
    "good (1); a correction, complaint, redo request, repeated request or tool error is bad "
    "(-1); a neutral follow-up or a new topic is unclear (0)."
)
HINT_SYSTEM = (
    "You improve an AI assistant. From the user's request, the assistant's answer and what the "
    "user (or a tool) said next, decide whether the next state reveals what would have made the "
    "answer better. If it does, write \\boxed{1} and then one short, concrete instruction taken "
    "from what the user said, between [HINT_START] and [HINT_END] (for example: \\boxed{1} "
    "[HINT_START]Answer in lowercase letters only.[HINT_END]). If it does not, write only "
    "\\boxed{-1}."
)


def build_prm_messages(*, request: str, answer: str, next_state: str) -> list[dict[str, str]]:
    """The judge prompt; it contains the request, the answer and the next state verbatim."""
    user = (
        f"## User request\n{request}\n\n## Assistant answer\n{answer}\n\n"
        f"## What happened next\n{next_state}\n\n"
        "Was the answer good? Reply with exactly one of "
        "\\boxed{1} (good), \\boxed{-1} (bad) or \\boxed{0} (unclear)."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def build_hint_messages(*, request: str, answer: str, next_state: str) -> list[dict[str, str]]:
    user = (
        f"## User request\n{request}\n\n## Assistant answer\n{answer}\n\n"
        f"## What the user said next\n{next_state}\n\n"
        "Reply \\boxed{1} [HINT_START]instruction[HINT_END], or \\boxed{-1}."
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
    """Majority of the parsed votes (unparseable ones are left out); a tie, or none, gives 0."""
    counts = Counter(vote for vote in votes if vote is not None)
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
    """Long enough, not trivial, not a "no hint needed" sentence, not praise, not debris."""
    if not hint:
        return False
    cleaned = hint.strip()
    normalised = re.sub(r"[^\w\s/]", "", cleaned.lower()).strip()
    if _hint_length(cleaned) < MIN_HINT_CHARS or normalised in TRIVIAL_HINTS:
        return False
    if _NO_HINT.search(cleaned) or _DEBRIS.search(cleaned):
        return False
    negative, positive = text_cues(cleaned)
    return score_from_cues(negative, positive, cleaned) != 1  # praise is no hint


def _hint_length(text: str) -> int:
    """Characters, a CJK one counting three: "请用公制单位" says as much as "use metric units"."""
    return len(text) + 2 * sum(len(run) for run in _CJK_RUN.findall(text))


def _stems(text: str) -> set[str]:
    """Content words (their first five letters) and, in CJK text, each pair of characters."""
    lowered = text.lower()
    stems = {word[:5] for word in _CONTENT_WORD.findall(lowered)}
    for run in _CJK_RUN.findall(lowered):
        stems |= {run[i : i + 2] for i in range(len(run) - 1)}
    return stems


def is_grounded(hint: str, evidence: str) -> bool:
    """The hint shares a content word (4+ letters, compared on its first five; in CJK text a
    pair of characters) with what the user or the tool said next: a judge's hint must come
    from the next state, not thin air."""
    user, tools = split_next_state(evidence)
    said = " ".join(user + tools) or evidence
    return bool(_stems(hint) & _stems(said))


def select_hint(candidates: Iterable[str | None], *, evidence: str | None = None) -> str | None:
    """The longest hint that a judge's reply says is needed (``\\boxed{1}``) and that is useful
    (and grounded in ``evidence``, the next state, when given); None when there is none."""
    hints = []
    for text in candidates:
        if not text or parse_vote(text) != 1:
            continue
        hint = extract_hint(text)
        if hint and is_useful_hint(hint) and (evidence is None or is_grounded(hint, evidence)):
            hints.append(hint)
    return max(hints, key=len) if hints else None


def feedback_hint(*, comment: str, correction: str, tags: Iterable[str]) -> str | None:
    """A user's own words as a hint: the comment (or else the correction), with reason tags."""
    text = comment.strip() or correction.strip()
    tag_list = [t for t in tags if t]
    if tag_list:
        reasons = "Reasons: " + ", ".join(tag_list) + "."
        text = f"{text} ({reasons})" if text else reasons
    return text or None


# complete(messages, n, choices) -> n reply texts; choices, when given, constrains each reply.
Complete = Callable[[list[dict[str, str]], int, "tuple[str, ...] | None"], list[str]]


@dataclass(frozen=True)
class Verdict:
    """What the judge decided about one turn; every vote and hint reply is kept, parsed or not."""

    score: int
    version: str  # CUES_VERSION or PROMPT_VERSION: which rules or prompts decided
    votes: list[dict[str, Any]] = field(default_factory=list)  # {"score": int | None, "text"}
    hint: str | None = None
    hint_votes: list[str] = field(default_factory=list)


def judge_verdict(
    *,
    kind: str,
    request: str,
    answer: str,
    next_state: str,
    rating: int,
    user_hint: str | None,
    m: int,
    complete: Complete,
) -> Verdict:
    """Score one turn (the user's rating when there is one, else the judge's majority on the next
    state) and, when it scored -1 and the user gave no hint, look for a hindsight hint."""
    if kind not in JUDGE_KINDS:
        raise ValueError(f"unknown judge {kind!r}; one of {', '.join(JUDGE_KINDS)}")
    version = {"cues": CUES_VERSION, "hindsight": HINDSIGHT_VERSION}.get(kind, PROMPT_VERSION)
    score, votes = rating, []
    if rating == 0 and next_state:
        if kind in ("cues", "hindsight"):
            texts = [cue_vote(next_state, request=request)[1]]
        else:
            messages = build_prm_messages(request=request, answer=answer, next_state=next_state)
            texts = complete(messages, m, VOTE_CHOICES)
        votes = [{"score": parse_vote(text), "text": text} for text in texts]
        score = majority(vote["score"] for vote in votes)
    if kind == "hindsight" and user_hint is None and next_state:
        # Whatever the sign: the follow-up itself is the teacher's context (trainer.hindsight).
        said = followup_text(next_state)
        hint = hindsight_hint(next_state) if is_useful_hint(said) else None
        return Verdict(score=score, version=version, votes=votes, hint=hint)
    if user_hint is not None or score >= 0 or not next_state:
        return Verdict(score=score, version=version, votes=votes, hint=user_hint)
    if kind == "cues":
        found = cue_hint(next_state)
        if not is_useful_hint(found):  # e.g. "The correct answer is Paris." alone reads as praise
            found = cue_hint(next_state, keep_complaint=True)
        hint_texts = [f"\\boxed{{1}} [HINT_START]{found}[HINT_END]" if found else "\\boxed{-1}"]
    else:
        messages = build_hint_messages(request=request, answer=answer, next_state=next_state)
        hint_texts = complete(messages, m, None)
    hint = select_hint(hint_texts, evidence=next_state)
    return Verdict(score=score, version=version, votes=votes, hint=hint, hint_votes=hint_texts)
