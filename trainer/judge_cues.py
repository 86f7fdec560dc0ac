"""The default PRM judge: reads the next state for the cues people and tools actually give.

No model: a correction, complaint, redo or repeated request ("No, that's wrong.", "I asked for
lowercase", "Try again", "Nein, das stimmt nicht.", "不对") is -1, and so is a request to change
the answer's form or content ("Shorter please.", "in celsius please", "Ohne Emojis bitte.",
"我是素食者，别放肉"), even after a thanks; thanks and approval ("Perfect, exactly what I
wanted!", "Danke, genau das wollte ich!", "谢谢，正是我想要的！") are +1; a tool's error is -1
and its successful output +1 (the action worked, as OpenClaw-RL scores it); anything else (a
neutral follow-up, a new topic, the end of the conversation) is 0, so the judge never invents a
reward. Each vote is a text that ends in ``\\boxed{...}`` and says which cues it saw, so it
always parses and an admin can read why.

The cues are kept as data in ``trainer/data/judge_lexicon.json`` (read once by
``trainer.judge_lexicon``), one section per language and per cue class: English, German,
French, Spanish, Chinese, Italian, Portuguese, Russian, Japanese and Korean; idioms, sarcasm,
corrections and complaints, requests, thanks, negations, contrasts and tool errors. Every
language's cues are scanned on every message (no language detection: people mix languages,
and a cue of one language rarely means something else in another). Chinese and Japanese have
no spaces and Korean joins endings to its words, so their cues are substrings. Idioms that
look negative word by word are read first ("不错" is praise; "没问题", "non c'è problema",
"не за что", "大丈夫です" and "괜찮아요" are no complaint), and a message that opens a new
question or task ("And how do I cook rice?", "Now write me a poem about cats") never counts
as the request said again. The English rules were written on the ``tune`` half of
``bench/data/next_states.json``; German, Chinese, French, Spanish and the requests on the
``tune`` cases of ``bench/data/next_states_multilingual.json`` and
``bench/data/next_states_fresh.json``; Italian, Portuguese, Russian, Japanese, Korean and new
questions after an answer on ``bench/data/next_states_languages_tune.json``.
``python -m bench.judging --cases FILE`` measures them on the held-out sets
(``next_states_multilingual.json``'s other half, ``next_states_blind.json``,
``next_states_languages.json``).

>>> cue_score("[user] No, that's wrong. Paris is in France.")
-1
>>> cue_score("[user] Perfect, exactly what I wanted!")
1
>>> cue_score("[user] And insects?")
0
>>> cue_score("[user] Danke, aber bitte kürzer.")
-1
>>> cue_score("[user] 谢谢，正是我想要的！")
1
>>> cue_score("[user] Спасибо, отлично!")
1
>>> cue_score("[user] もっと短くしてください。")
-1
"""

from __future__ import annotations

import re

from trainer.judge_lexicon import load_lexicon

# What the judging service writes before each part of a next state.
_PART = re.compile(r"^\[(user|user feedback|tool result[^\]]*)\] ?", re.MULTILINE)

_LEXICON = load_lexicon()
# Idioms read first of all: they look negative (or positive) word by word and are not;
# and phrases that only look like a cue ("不好意思" opens a polite question, not a complaint).
_IDIOMS = _LEXICON.pattern("positive_idioms")
_NEUTRAL = _LEXICON.pattern("neutral_idioms")
# Sarcasm and complaints that no praise word around them can outweigh.
_SARCASM_RE = _LEXICON.pattern("sarcasm")
# Corrections, complaints, redo requests: the verdict that the answer missed.
_NEGATIVE_RE = _LEXICON.compiled("negative")
# Requests to change the answer's form or content: it missed what the user wanted.
_REQUEST_RE = _LEXICON.compiled("request")
_POSITIVE_RE = _LEXICON.compiled("positive")
# "Thanks, but ...": the objection after the contrast is what the user means.
_CONTRAST = _LEXICON.pattern("contrast")
_TOOL_ERROR = _LEXICON.pattern("tool_error", re.IGNORECASE)
# A positive word right after a negation ("not helpful", "doesn't work", "不清楚") or followed
# by one ("hilft nicht", "funktioniert nicht", "完璧じゃない") is not approval.
_NEGATED_BEFORE = re.compile(f"(?:{_LEXICON.alternation('negated_before')})$")
_NEGATED_AFTER = re.compile(f"^(?:{_LEXICON.alternation('negated_after')})")
_WORD = re.compile(r"[^\W\d_]+'?[^\W\d_]*")
# Han, kana and Hangul: scripts whose characters, not space-separated words, carry a hint.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
# "And how ...", "Now write ...": a new question or task, not the request said again.
_NEW_REQUEST = _LEXICON.pattern("new_request")
# English stop words, also used to spot a repeated request; every language's for hints.
_STOPWORDS = _LEXICON.words("stopwords", "en")
_HINT_STOPWORDS = _LEXICON.words("stopwords")
# Words that only repeat the verdict: "No, that's wrong. Try again." teaches nothing.
_VERDICT_WORDS = _LEXICON.words("verdict_words")
# Characters and endings that carry no request: "重新写一个。" is "Try again." in Chinese,
# "もう一度お願いします。" in Japanese.
_HINT_FILLER = _LEXICON.pattern("hint_filler")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])")


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
    """The negative and the positive cues found in one message of the user's. A request to
    change the answer is listed as ``asks for ...`` and sarcasm as ``sarcasm: ...``."""
    lowered = _NEUTRAL.sub(" ", _normalise(text))
    positive = [m.group(0) for m in _IDIOMS.finditer(lowered)]
    lowered = _IDIOMS.sub(" ", lowered)
    negative = [f"sarcasm: {m.group(0)}" for m in _SARCASM_RE.finditer(lowered)]
    lowered = _SARCASM_RE.sub(" ", lowered)
    negative += [m.group(0).strip(" ,;.") for p in _NEGATIVE_RE for m in p.finditer(lowered)]
    negative += [f"asks for {m.group(0)}" for p in _REQUEST_RE for m in p.finditer(lowered)]
    for pattern in _POSITIVE_RE:
        for match in pattern.finditer(lowered):
            before = lowered[max(0, match.start() - 20) : match.start()]
            after = lowered[match.end() : match.end() + 20]
            if _NEGATED_BEFORE.search(before) or _NEGATED_AFTER.search(after):
                negative.append(f"negated {match.group(0)}")
            else:
                positive.append(match.group(0))
    if not positive and _restates(lowered, _normalise(request)):
        negative.append("asks for the same thing again")
    return negative, positive


def _restates(text: str, request: str) -> bool:
    """The user repeats (at least two words of) the request instead of asking something new (a
    question, or a message that opens a new task, never repeats it)."""
    if not request or "?" in text or _NEW_REQUEST.search(text):
        return False
    # "please" counts here: "In Spanish please!" after "Reply in Spanish please: ..." repeats.
    words = {w for w in _WORD.findall(text) if len(w) > 2 and w not in _STOPWORDS - {"please"}}
    shared = words & set(_WORD.findall(request))
    return len(shared) >= 2 and len(shared) * 2 >= len(words)


def score_from_cues(negative: list[str], positive: list[str], text: str) -> int:
    """-1 when the user objects, asks for a change or is sarcastic (also "thanks, but ..."), +1
    when they approve, else 0."""
    if any(cue.startswith(("sarcasm: ", "asks for ")) for cue in negative):
        return -1
    if negative and (len(negative) >= len(positive) or _CONTRAST.search(_normalise(text))):
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
    >>> cue_hint("[user] Nein, das stimmt nicht. Bitte kürzer.")
    'Bitte kürzer.'
    >>> cue_hint("[user] 不对。请用公制单位。")
    '请用公制单位。'
    """
    user, tools = split_next_state(next_state)
    if user:
        sentences = [s for text in user for s in _SENTENCE_END.split(text.strip()) if s.strip()]
        kept = [s.strip() for s in sentences if _says_more_than_a_verdict(s)]
        if keep_complaint and kept:
            return " ".join(text.strip() for text in user)
        return _join(kept) if kept else None
    errors = [t for t in tools if _TOOL_ERROR.search(t)]
    return f"The tool answered: {errors[0]}" if errors else None


def _join(sentences: list[str]) -> str:
    """Sentences joined as they were written: with a space, without one after a CJK stop."""
    text = sentences[0]
    for sentence in sentences[1:]:
        text += sentence if text.endswith(("。", "！", "？")) else f" {sentence}"
    return text


def _says_more_than_a_verdict(sentence: str) -> bool:
    """A word (or two CJK, kana or Hangul characters) left once the negative cues, the sarcasm,
    the fillers, the stop words and the verdict words are gone."""
    rest = _SARCASM_RE.sub(" ", _normalise(sentence))
    for pattern in _NEGATIVE_RE:
        rest = pattern.sub(" ", rest)
    rest = _HINT_FILLER.sub("", rest)
    if len(_CJK.findall(rest)) >= 2:
        return True
    return any(
        len(w) > 2 and w not in _HINT_STOPWORDS and w not in _VERDICT_WORDS and not _CJK.match(w)
        for w in _WORD.findall(rest)
    )
