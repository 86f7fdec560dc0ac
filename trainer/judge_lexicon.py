"""The cue judge's lexicon: its cues by language and by class, kept as data in
``trainer/data/judge_lexicon.json`` and read once.

Each language's section maps a cue class (the file's ``classes`` says what each one is) to a
list of regular expressions, matched against the lower-cased message, or, for the word classes,
to a string of space-separated words. ``$NAME`` in a pattern stands for ``shared[NAME]`` (the
programming languages, the reply languages, the interjections ahead of a "no"). The classes'
patterns are taken in the file's order of languages; an unknown class, an unknown ``$NAME`` or
a pattern that does not compile is refused when the file is read.

>>> lexicon = load_lexicon()
>>> "ja" in lexicon.languages and "stopwords" in WORD_CLASSES
True
>>> bool(lexicon.pattern("contrast").search("danke, aber kürzer"))
True
>>> "please" in lexicon.words("stopwords", "en")
True
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LEXICON_PATH = Path(__file__).with_name("data") / "judge_lexicon.json"
PATTERN_CLASSES = (
    "positive_idioms",
    "neutral_idioms",
    "sarcasm",
    "negative",
    "request",
    "positive",
    "contrast",
    "negated_before",
    "negated_after",
    "tool_error",
    "new_request",
    "hint_filler",
)
WORD_CLASSES = ("stopwords", "verdict_words")
_SHARED_NAME = re.compile(r"\$([A-Z]+)")


@dataclass(frozen=True)
class Lexicon:
    """The sections of the lexicon, by language (in the file's order) and by cue class."""

    sections: dict[str, dict[str, list[str] | str]]

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(self.sections)

    def patterns(self, cue_class: str, *languages: str) -> list[str]:
        """The class's patterns in the given languages (all by default), in the file's order."""
        if cue_class not in PATTERN_CLASSES:
            raise KeyError(cue_class)
        return [
            pattern
            for language, section in self.sections.items()
            if not languages or language in languages
            for pattern in section.get(cue_class, [])
        ]

    def compiled(self, cue_class: str) -> list[re.Pattern[str]]:
        """Each of the class's patterns on its own: a message scores one cue per match."""
        return [re.compile(pattern) for pattern in self.patterns(cue_class)]

    def alternation(self, cue_class: str) -> str:
        """The class's patterns as one alternation; one that never matches when it has none."""
        patterns = self.patterns(cue_class)
        return "|".join(f"(?:{p})" for p in patterns) if patterns else r"(?!)"

    def pattern(self, cue_class: str, flags: int = 0) -> re.Pattern[str]:
        return re.compile(self.alternation(cue_class), flags)

    def words(self, cue_class: str, *languages: str) -> frozenset[str]:
        """The class's words in the given languages (all by default)."""
        if cue_class not in WORD_CLASSES:
            raise KeyError(cue_class)
        return frozenset(
            word
            for language, section in self.sections.items()
            if not languages or language in languages
            for word in str(section.get(cue_class, "")).split()
        )


def _expand(pattern: str, shared: dict[str, str], where: str) -> str:
    def name(match: re.Match[str]) -> str:
        if match.group(1) not in shared:
            raise ValueError(f"{where}: unknown shared name ${match.group(1)}")
        return shared[match.group(1)]

    expanded = _SHARED_NAME.sub(name, pattern)
    try:
        re.compile(expanded)
    except re.error as error:
        raise ValueError(f"{where}: {pattern!r} does not compile: {error}") from error
    return expanded


@cache
def load_lexicon(path: Path = LEXICON_PATH) -> Lexicon:
    """The lexicon at ``path``, checked, with the shared names put in; read once per path."""
    data = json.loads(path.read_text(encoding="utf-8"))
    shared: dict[str, str] = data.get("shared", {})
    sections: dict[str, dict[str, list[str] | str]] = {}
    for language, section in data["languages"].items():
        sections[language] = {}
        for cue_class, entries in section.items():
            where = f"{path.name}: {language}.{cue_class}"
            if cue_class in WORD_CLASSES:
                sections[language][cue_class] = str(entries)
            elif cue_class in PATTERN_CLASSES:
                sections[language][cue_class] = [_expand(p, shared, where) for p in entries]
            else:
                raise ValueError(f"{where}: unknown cue class")
    return Lexicon(sections)
