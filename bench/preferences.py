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
}
KNOWN_FIXES = {"prepend", "truncate_words", "lowercase", "append"}
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


@dataclass(frozen=True)
class Preference:
    name: str
    comment: str
    rules: dict[str, Any]
    fix: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Preference:
        unknown = set(data.get("rules", {})) - KNOWN_RULES
        if unknown:
            raise ValueError(f"preference {data.get('name')!r}: unknown rules {sorted(unknown)}")
        unknown = set(data.get("fix", {})) - KNOWN_FIXES
        if unknown:
            raise ValueError(f"preference {data.get('name')!r}: unknown fixes {sorted(unknown)}")
        if not data.get("rules"):
            raise ValueError(f"preference {data.get('name')!r} has no rules")
        return cls(
            name=data["name"], comment=data["comment"], rules=data["rules"], fix=data.get("fix", {})
        )

    @property
    def correctable(self) -> bool:
        return bool(self.fix)

    def satisfied(self, answer: str) -> bool:
        text = answer.strip()
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
        }
        return all(checks[rule](value) for rule, value in self.rules.items())

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


def load_prompts(path: Path) -> dict[str, list[str]]:
    """Every split of the prompt file ("train", "held_out", "held_out_other", ...) by name."""
    data = json.loads(path.read_text())
    splits = {name: list(items) for name, items in data.items() if isinstance(items, list)}
    missing = {"train", "held_out"} - set(splits)
    if missing:
        raise ValueError(f"{path}: no {', '.join(sorted(missing))} split")
    return splits
