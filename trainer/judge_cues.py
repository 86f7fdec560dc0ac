"""The default PRM judge: reads the next state for the cues people and tools actually give.

No model: a correction, complaint, redo or repeated request ("No, that's wrong.", "I asked for
lowercase", "Try again", "In Spanish please!") is -1; thanks and approval ("Perfect, exactly
what I wanted!", "That worked, thank you") are +1; a tool's error is -1 and its successful
output +1 (the action worked, as OpenClaw-RL scores it); anything else (a neutral follow-up,
a new topic, the end of the session) is 0, so the judge never invents a reward. Each vote is a
text that ends in ``\\boxed{...}`` and says which cues it saw, so it always parses and an admin
can read why. The rules were written on the ``tune`` half of ``bench/data/next_states.json``;
``python -m bench.judging`` measures them on the held-out half.

>>> cue_score("[user] No, that's wrong. Paris is in France.")
-1
>>> cue_score("[user] Perfect, exactly what I wanted!")
1
>>> cue_score("[user] And insects?")
0
"""

from __future__ import annotations

import re

# What the judging service writes before each part of a next state.
_PART = re.compile(r"^\[(user|user feedback|tool result[^\]]*)\] ?", re.MULTILINE)

_NEGATIVE = [
    r"^(no|nope|nah)\b(?!\s+(problem|worries)\b)",
    r"\b(wrong|incorrect|inaccurate|mistaken|mistakes?|misspel\w*|typos?)\b",
    r"(^|[,;.]\s*)not\b",
    r"\bnot (right|correct|true|quite|what|a|an|it|that|helpful|useful|accurate|enough|at all)\b",
    r"\b(isn't|is not|aren't|wasn't|doesn't|does not|didn't|did not|don't|do not|can't|won't)\b",
    r"\bnever\b",
    r"\b(i|we) (asked|said|told|meant|wanted|specified|requested)\b",
    r"\bagain\b|\bredo\b|\bretry\b|\bonce more\b",
    r"\b(forgot|forgotten|missed|ignored|skipped|omitted)\b",
    r"\b(way )?too (long|short|technical|formal|informal|verbose|wordy|complicated|complex)\b",
    r"\btoo vague\b",
    r"\b(useless|unhelpful|pointless|nonsense|boring|confusing|terrible|awful|worse)\b",
    r"\bstill\b",
]
_POSITIVE = [
    r"\b(thanks|thank you|thank u|thx|ty|cheers|appreciate[ds]?|appreciated|grateful)\b",
    r"\b(perfect(ly)?|great|awesome|excellent|brilliant|fantastic|wonderful|amazing|superb)\b",
    r"\b(nice|lovely|spot on|exactly|love it|well done|good job|helpful|helped)\b",
    r"\b(works|worked|that's right|that is right|correct|right on)\b",
]
_TOOL_ERROR = re.compile(
    r"\b(error|exception|traceback|failed|failure|not found|denied|invalid|refused|timed? ?out|"
    r"unauthori[sz]ed|forbidden)\b|\"ok\"\s*:\s*false|\bstatus\W+[45]\d\d\b",
    re.IGNORECASE,
)
# A positive word right after a negation ("not helpful", "doesn't work") is not approval.
_NEGATED = r"(not|n't|never|no longer)\s+(\w+\s+)?"
_WORD = re.compile(r"[a-z']+")
_STOPWORDS = frozenset(
    "a an the and or but to of in on at for with is are was be it this that my me you your i "
    "now then so do can could would will just also one what how that's it's i'm please "
    "very really".split()
)
# Words that only repeat the verdict: "No, that's wrong. Try again." teaches nothing.
_VERDICT_WORDS = frozenset("try fix redo answer response again wrong".split())
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def split_next_state(next_state: str) -> tuple[list[str], list[str]]:
    """The user's words and the tool results in a next state, in order."""
    user: list[str] = []
    tools: list[str] = []
    matches = list(_PART.finditer(next_state or ""))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(next_state)
        text = next_state[match.end() : end].strip()
        (tools if match.group(1).startswith("tool") else user).append(text)
    return user, tools


def _normalise(text: str) -> str:
    return text.lower().replace("\u2019", "'").strip()


def text_cues(text: str, *, request: str = "") -> tuple[list[str], list[str]]:
    """The negative and the positive cues found in one message of the user's."""
    lowered = _normalise(text)
    negative = [m.group(0) for p in _NEGATIVE for m in re.finditer(p, lowered)]
    positive = []
    for pattern in _POSITIVE:
        for match in re.finditer(pattern, lowered):
            before = lowered[max(0, match.start() - 20) : match.start()]
            if re.search(_NEGATED + r"$", before):
                negative.append(f"negated {match.group(0)}")
            else:
                positive.append(match.group(0))
    if not positive and _restates(lowered, _normalise(request)):
        negative.append("asks for the same thing again")
    return negative, positive


def _restates(text: str, request: str) -> bool:
    """The user repeats (at least two words of) the request instead of asking something new."""
    if not request or "?" in text:
        return False
    # "please" counts here: "In Spanish please!" after "Reply in Spanish please: ..." repeats.
    words = {w for w in _WORD.findall(text) if len(w) > 2 and w not in _STOPWORDS - {"please"}}
    shared = words & set(_WORD.findall(request))
    return len(shared) >= 2 and len(shared) * 2 >= len(words)


def score_from_cues(negative: list[str], positive: list[str], text: str) -> int:
    """-1 when the user objects (also "thanks, but ..."), +1 when they approve, else 0."""
    if negative and (len(negative) >= len(positive) or " but " in f" {_normalise(text)} "):
        return -1
    return 1 if positive else 0


def cue_vote(next_state: str, *, request: str = "") -> tuple[int, str]:
    """The cue judge's vote on a next state, and its text (ending in ``\\boxed{score}``)."""
    user, tools = split_next_state(next_state)
    if user:
        text = " ".join(user)
        negative, positive = text_cues(text, request=request)
        score = score_from_cues(negative, positive, text)
        why = f"user cues: negative {negative or 'none'}, positive {positive or 'none'}"
    elif tools:
        errors = [m.group(0) for t in tools for m in _TOOL_ERROR.finditer(t)]
        score = -1 if errors else 1
        why = f"tool result: errors {errors}" if errors else "tool result without an error"
    else:
        score, why = 0, "no user message or tool result to read"
    return score, f"{why} \\boxed{{{score}}}"


def cue_score(next_state: str, *, request: str = "") -> int:
    return cue_vote(next_state, request=request)[0]


def cue_hint(next_state: str, *, keep_complaint: bool = False) -> str | None:
    """Hindsight from a next state the cue judge scored -1: the user's own sentences that say
    more than a verdict (the complaint around them dropped: "No, that's not what I asked for."
    teaches a teacher to apologise, not what was asked for), or the tool's error; None when it
    carries nothing to learn from. ``keep_complaint``: the user's whole message when any of it
    says more than a verdict (the judge's fallback when the sentences alone are no hint, e.g.
    "The correct answer is Paris.", which reads as praise without its "No, that's wrong.").

    >>> cue_hint("[user] No, that's not what I asked for. Please start with 'Sure!'")
    "Please start with 'Sure!'"
    >>> cue_hint("[user] No, that's wrong. Try again.") is None
    True
    """
    user, tools = split_next_state(next_state)
    if user:
        sentences = [s for text in user for s in _SENTENCE_END.split(text.strip()) if s.strip()]
        kept = [s.strip() for s in sentences if _says_more_than_a_verdict(s)]
        if keep_complaint and kept:
            return " ".join(text.strip() for text in user)
        return " ".join(kept) if kept else None
    errors = [t for t in tools if _TOOL_ERROR.search(t)]
    return f"The tool answered: {errors[0]}" if errors else None


def _says_more_than_a_verdict(sentence: str) -> bool:
    """A word left once the negative cues, the stop words and the verdict words are gone."""
    rest = _normalise(sentence)
    for pattern in _NEGATIVE:
        rest = re.sub(pattern, " ", rest)
    return any(
        len(w) > 2 and w not in _STOPWORDS and w not in _VERDICT_WORDS for w in _WORD.findall(rest)
    )
