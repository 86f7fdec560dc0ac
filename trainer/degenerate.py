"""How a generated answer is broken, whatever was asked: empty, looping, cut off, or sliding
into another script halfway. Pure Python: the probe gate counts these in a candidate's answers
(``trainer.probing``) and the benchmarks' simulated user dislikes them."""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence

DEGENERATE_KINDS = ("empty", "repeating", "cut_off", "language_switch")
REPEAT_MIN_RUNS = 4
"""An n-gram (n ≤ REPEAT_MAX_N) repeated this many times in a row makes it "repeating"."""
REPEAT_MAX_N = 6
"""Loops of up to six tokens ("1.1.1.1…", a short phrase over and over): four of them fit the
probe's 24-token answers."""
MIXED_SCRIPT_SHARE = 0.25
"""An answer whose second script holds this share of its letters is "language_switch"."""


def degenerate_kinds(
    answer: str, answer_ids: Sequence[int], *, ended: bool, max_new_tokens: int
) -> list[str]:
    """Which ways a greedy answer is degenerate (a subset of ``DEGENERATE_KINDS``).

    - empty: nothing but whitespace;
    - repeating: one token n-gram (n ≤ ``REPEAT_MAX_N``) repeated ``REPEAT_MIN_RUNS`` times
      in a row;
    - cut_off: it used every token it was allowed without ending (the gate compares the count
      with the base's, which is cut off by the same limit);
    - language_switch: its letters mix scripts, the second one at least ``MIXED_SCRIPT_SHARE``
      of them (a small model sliding into another language mid-answer). An answer wholly in
      another language is not degenerate: a user may prefer one.

    >>> degenerate_kinds("Hello there.", [1, 2, 3], ended=True, max_new_tokens=24)
    []
    >>> degenerate_kinds(" ", [5], ended=True, max_new_tokens=24)
    ['empty']
    """
    kinds = []
    if not answer.strip():
        kinds.append("empty")
    if _longest_repeat(list(answer_ids)) >= REPEAT_MIN_RUNS:
        kinds.append("repeating")
    if not ended and len(answer_ids) >= max_new_tokens:
        kinds.append("cut_off")
    scripts = Counter(_scripts(answer)).most_common()
    if len(scripts) > 1 and scripts[1][1] >= MIXED_SCRIPT_SHARE * sum(n for _, n in scripts):
        kinds.append("language_switch")
    return kinds


def _longest_repeat(ids: list[int], max_n: int = REPEAT_MAX_N) -> int:
    """The most times any n-gram (n ≤ max_n) follows itself in a row.

    >>> _longest_repeat([1, 2, 1, 2, 1, 2, 3])
    3
    """
    best = 1 if ids else 0
    for n in range(1, max_n + 1):
        for start in range(len(ids) - n):
            runs = 1
            while ids[start + runs * n : start + (runs + 1) * n] == ids[start : start + n]:
                runs += 1
            best = max(best, runs)
    return best


def _scripts(text: str) -> list[str]:
    """The script of each letter ("LATIN", "CYRILLIC", "CJK", ...), from its Unicode name;
    Japanese kana count as CJK, since Japanese writes them with kanji."""
    scripts = []
    for char in text:
        if char.isalpha():
            script = unicodedata.name(char, "UNKNOWN").split(" ")[0]
            scripts.append("CJK" if script in ("HIRAGANA", "KATAKANA") else script)
    return scripts
