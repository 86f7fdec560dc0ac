"""Simulated users' preferences, as data: a name, the comment written when an answer misses,
a checker from a small rule set and, optionally, a mechanical fix for corrections.

Rules (all given ones must hold):
  starts_with: str         the answer (trimmed) begins with this text
  ends_with: str           the answer (trimmed) ends with this text
  ends_with_question: true the answer ends with "?"
  max_words: int           at most this many words
  min_words: int           at least this many words
  regex_must: [str]        every pattern matches somewhere
  regex_must_not: [str]    no pattern matches anywhere
  bullet_list: true        at least two lines start with "-", "*" or "•"
  no_emoji: true           no emoji characters
  lowercase: true          no uppercase letters
  words_must_not: [str]    none of these words or phrases, matched whole and case-blind (a
                           plural in -s/-es counts: "chicken" also finds "chickens")
  words_any: [str]         at least one of these words or phrases, matched the same way
  if_matches: {re: rules}  where the pattern matches (case-blind), those rules hold too
  code_blocks: {languages: [str], min: int}
                           at least ``min`` fenced code blocks, each tagged with one of
                           ``languages`` ("" for an untagged fence)
Fixes (how the user rewrites a missed answer, for --feedback corrections):
  prepend: str             put this text in front (if not already there)
  truncate_words: int      keep the first N words
  lowercase: true          lowercase everything
  append: str              add this text at the end

>>> pref = Preference.from_dict({"name": "sure", "comment": "Start with Sure!",
...     "rules": {"starts_with": "Sure!"}, "fix": {"prepend": "Sure! "}})
>>> pref.satisfied("Sure! Paris.")
True
>>> pref.correct("Paris.")
'Sure! Paris.'

A content preference names the prompts where it matters (``prompts``: ``train`` and
``held_out``, the held-out ones on other topics where it applies too) and the follow-ups a user
writes in their own words (``followups``: per language, on a miss); ``prompts_for`` picks a
preference's own prompts or the shared ones.

>>> veg = Preference.from_dict({"name": "veg", "comment": "I'm vegetarian.",
...     "rules": {"words_must_not": ["chicken", "fish"]}})
>>> veg.satisfied("Fry the tofu."), veg.satisfied("Add two Chickens."), veg.satisfied("Go fishing.")
(True, False, True)

A simulated user is also what a person would be about a broken answer: an answer that loops
("Sure!\n\nSure!\n\nSure!...") meets no preference, however it begins (``Preference.meets``,
``answer_flaws``). Without that rule the benchmarks counted such loops as learnt and the
simulated user liked them, so RL rewarded them (measured: a "start with Sure!" run served a
version whose held-out score read 1.00 while 3 of its 12 answers were that loop).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EMOJI = re.compile("[\U0001f300-\U0001faff\U00002600-\U000027bf\U0001f000-\U0001f2ff]")
BULLET = re.compile(r"^\s*([-*•]|\d+[.)])\s+", re.MULTILINE)
KNOWN_RULES = {
    "starts_with",
    "ends_with",
    "ends_with_question",
    "max_words",
    "min_words",
    "regex_must",
    "regex_must_not",
    "bullet_list",
    "no_emoji",
    "lowercase",
    "words_must_not",
    "words_any",
    "if_matches",
    "code_blocks",
}
KNOWN_FIXES = {"prepend", "truncate_words", "lowercase", "append"}
FENCE = re.compile(r"^\s*```[ \t]*([^\s`]*)[^\n]*\n.*?^\s*```", re.MULTILINE | re.DOTALL)
LOOP_COMMENT = (
    "You keep repeating yourself: answer once, without saying the same thing over and over."
)
FLAW_COMMENTS = {
    "repeating": LOOP_COMMENT,
    "empty": "You did not answer anything. Please answer the question.",
    "language_switch": "Please answer in one language; don't switch halfway.",
}
"""What the simulated user writes about each way an answer is broken (``answer_flaws``)."""


def flaw_comment(flaws: Sequence[str]) -> str:
    """The user's words about a broken answer, one sentence per flaw.

    >>> flaw_comment(["repeating"]) == LOOP_COMMENT
    True
    >>> flaw_comment([])
    ''
    """
    return " ".join(FLAW_COMMENTS[kind] for kind in flaws)


def answer_flaws(answer: str, token_ids: Sequence[int]) -> list[str]:
    """How an answer is broken whatever the preference: the probe gate's degenerate kinds
    (``trainer.degenerate``: empty, repeating, language switch) except "cut off",
    since a benchmark answer is cut at its token budget on purpose.

    >>> answer_flaws("Paris.", [1, 2])
    []
    >>> answer_flaws("Sure! Sure! Sure! Sure!", [7, 8, 7, 8, 7, 8, 7, 8])
    ['repeating']
    """
    from trainer.degenerate import degenerate_kinds

    # ended=True: a benchmark answer's cut-off is by design, not a flaw
    return degenerate_kinds(answer, token_ids, ended=True, max_new_tokens=len(token_ids) + 1)


def word_pattern(word: str) -> re.Pattern[str]:
    """``word`` (or phrase) as a whole word, case-blind, its plural in -s/-es included; an edge
    that is not a letter ("°F") needs no boundary there.

    >>> bool(word_pattern("mile").search("a 10-mile walk"))
    True
    >>> bool(word_pattern("ham").search("Hamburg")), bool(word_pattern("°F").search("350°F"))
    (False, True)
    """
    start = r"(?<!\w)" if re.match(r"\w", word) else ""
    end = r"(?:s|es)?(?!\w)" if re.search(r"\w$", word) else ""
    return re.compile(start + re.escape(word) + end, re.IGNORECASE)


def _has_word(text: str, words: Sequence[str]) -> bool:
    return any(word_pattern(w).search(text) for w in words)


def code_fences(text: str) -> list[str]:
    """The language tag of each fenced code block, lowercased ("" for an untagged fence)."""
    return [tag.lower() for tag in FENCE.findall(text)]


def _check_rules(name: str, rules: dict[str, Any]) -> None:
    unknown = set(rules) - KNOWN_RULES
    if unknown:
        raise ValueError(f"preference {name!r}: unknown rules {sorted(unknown)}")
    for pattern, nested in rules.get("if_matches", {}).items():
        re.compile(pattern)
        if not nested:
            raise ValueError(f"preference {name!r}: if_matches {pattern!r} has no rules")
        _check_rules(name, nested)


def rules_hold(text: str, rules: dict[str, Any]) -> bool:
    """Every rule of ``rules`` (the rule set above) holds for the trimmed ``text``."""
    words = len(text.split())
    checks = {
        "starts_with": lambda v: text.startswith(v),
        "ends_with": lambda v: text.endswith(v),
        "ends_with_question": lambda v: text.endswith("?") == bool(v),
        "max_words": lambda v: words <= int(v),
        "min_words": lambda v: words >= int(v),
        "regex_must": lambda v: all(re.search(p, text) for p in v),
        "regex_must_not": lambda v: not any(re.search(p, text) for p in v),
        "bullet_list": lambda v: (len(BULLET.findall(text)) >= 2) == bool(v),
        "no_emoji": lambda v: (EMOJI.search(text) is None) == bool(v),
        "lowercase": lambda v: (text == text.lower()) == bool(v),
        "words_must_not": lambda v: not _has_word(text, v),
        "words_any": lambda v: _has_word(text, v),
        "if_matches": lambda v: all(
            rules_hold(text, nested)
            for pattern, nested in v.items()
            if re.search(pattern, text, re.IGNORECASE)
        ),
        "code_blocks": lambda v: (
            len(code_fences(text)) >= int(v.get("min", 0))
            and all(tag in v["languages"] for tag in code_fences(text))
        ),
    }
    return all(checks[rule](value) for rule, value in rules.items())


@dataclass(frozen=True)
class Preference:
    name: str
    comment: str
    rules: dict[str, Any]
    fix: dict[str, Any] = field(default_factory=dict)
    # the prompts where this preference matters, by split ("train", "held_out"); empty: shared
    prompts: dict[str, list[str]] = field(default_factory=dict)
    # what a user writes next on a miss, in their own words, per language ("en", "de", "zh")
    followups: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preference:
        name = data.get("name")
        if not data.get("rules"):
            raise ValueError(f"preference {name!r} has no rules")
        _check_rules(name, data["rules"])
        unknown = set(data.get("fix", {})) - KNOWN_FIXES
        if unknown:
            raise ValueError(f"preference {name!r}: unknown fixes {sorted(unknown)}")
        prompts = {k: list(v) for k, v in data.get("prompts", {}).items()}
        missing = {"train", "held_out"} - set(prompts) if prompts else set()
        if missing:
            raise ValueError(f"preference {name!r}: prompts without {', '.join(sorted(missing))}")
        if set(prompts.get("train", [])) & set(prompts.get("held_out", [])):
            raise ValueError(f"preference {name!r}: a prompt is both train and held_out")
        return cls(
            name=data["name"],
            comment=data["comment"],
            rules=data["rules"],
            fix=data.get("fix", {}),
            prompts=prompts,
            followups={k: list(v) for k, v in data.get("followups", {}).items()},
        )

    @property
    def correctable(self) -> bool:
        return bool(self.fix)

    def satisfied(self, answer: str) -> bool:
        return rules_hold(answer.strip(), self.rules)

    def meets(self, answer: str, token_ids: Sequence[int]) -> bool:
        """The answer satisfies the preference and is not broken (``answer_flaws``): what the
        benchmarks count as learnt and what the simulated user likes."""
        return self.satisfied(answer) and not answer_flaws(answer, token_ids)

    def correct(self, answer: str) -> str | None:
        """The answer as the user would rewrite it, or None without a mechanical fix."""
        if not self.fix:
            return None
        text = answer.strip()
        if "truncate_words" in self.fix:
            text = " ".join(text.split()[: int(self.fix["truncate_words"])])
        if self.fix.get("lowercase"):
            text = text.lower()
        if "prepend" in self.fix and not text.startswith(self.fix["prepend"].strip()):
            text = self.fix["prepend"] + text
        if "append" in self.fix and not text.endswith(self.fix["append"].strip()):
            text = text + self.fix["append"]
        return text


def load_preferences(path: Path) -> list[Preference]:
    data = json.loads(path.read_text())
    return [Preference.from_dict(item) for item in data["preferences"]]


def prompts_for(
    preference: Preference, default_splits: dict[str, list[str]]
) -> dict[str, list[str]]:
    """The preference's own prompt splits where it names them, else the shared ones.

    >>> shared = {"train": ["a"], "held_out": ["b"], "held_out_other": ["c"]}
    >>> prompts_for(Preference("p", "c", {"no_emoji": True}), shared) == shared
    True
    >>> own = {"train": ["pasta?"], "held_out": ["picnic?"]}
    >>> prompts_for(Preference("v", "c", {"no_emoji": True}, prompts=own), shared) == own
    True
    """
    return dict(preference.prompts) if preference.prompts else dict(default_splits)


def load_prompts(path: Path) -> dict[str, list[str]]:
    """Every split of the prompt file ("train", "held_out", "held_out_other", ...) by name."""
    data = json.loads(path.read_text())
    splits = {name: list(items) for name, items in data.items() if isinstance(items, list)}
    missing = {"train", "held_out"} - set(splits)
    if missing:
        raise ValueError(f"{path}: no {', '.join(sorted(missing))} split")
    return splits
