"""PRM votes, majority, hints: pure functions, no model."""

from __future__ import annotations

import doctest

import pytest

import trainer.judge
from trainer.judge import (
    build_hint_messages,
    build_prm_messages,
    extract_hint,
    feedback_hint,
    is_useful_hint,
    majority,
    parse_vote,
    select_hint,
)


def test_doctests_hold() -> None:
    assert doctest.testmod(trainer.judge).failed == 0


@pytest.mark.parametrize(
    ("text", "vote"),
    [
        ("\\boxed{1}", 1),
        ("\\boxed{-1}", -1),
        ("\\boxed{0}", 0),
        ("\\boxed{+1}", 1),
        ("\\boxed{ -1 }", -1),
        ("Reasoning... so the final score is \\boxed{1}.", 1),
        ("First I thought \\boxed{1} but actually \\boxed{-1}", -1),
        ("noise \\boxed{2}", None),
        ("boxed{1} without a backslash", None),
        ("The answer is good.", None),
        ("", None),
        ("\\boxed{yes}", None),
    ],
)
def test_vote_parsing_takes_the_last_valid_box(text: str, vote: int | None) -> None:
    assert parse_vote(text) == vote


@pytest.mark.parametrize(
    ("votes", "result"),
    [
        ([1, 1, 1], 1),
        ([1, 1, -1], 1),
        ([-1, -1, 1], -1),
        ([1, -1, 0], 0),
        ([1, -1], 0),
        ([None, None, 1], 0),
        ([None, 1, 1], 1),
        ([], 0),
        ([0, 0, 1], 0),
    ],
)
def test_majority_with_ties_and_unparseable_votes_as_zero(votes, result) -> None:
    assert majority(votes) == result


def test_the_judge_prompt_contains_request_answer_and_next_state() -> None:
    text = "\n".join(
        m["content"]
        for m in build_prm_messages(request="REQ-123", answer="ANS-456", next_state="NEXT-789")
    )
    assert "REQ-123" in text and "ANS-456" in text and "NEXT-789" in text
    assert "\\boxed{1}" in text and "\\boxed{-1}" in text and "\\boxed{0}" in text
    hint_text = "\n".join(
        m["content"]
        for m in build_hint_messages(request="REQ-123", answer="ANS-456", next_state="NEXT-789")
    )
    assert "REQ-123" in hint_text and "[HINT_START]" in hint_text


def test_hint_extraction() -> None:
    assert extract_hint("x [HINT_START] Be brief. [HINT_END] y") == "Be brief."
    assert extract_hint("[HINT_START]a[HINT_END] [HINT_START]second one[HINT_END]") == "second one"
    assert extract_hint("no markers") is None
    assert extract_hint("[HINT_START] unterminated") is None


@pytest.mark.parametrize(
    "hint", ["ok", "Wrong!", "short", "thank you", "  NONE ", "", None, "no hint"]
)
def test_trivial_or_short_hints_are_dropped(hint) -> None:
    assert not is_useful_hint(hint)


def test_the_longest_useful_hint_wins() -> None:
    assert select_hint([None, "ok", "Use bullet points.", "Answer in under 40 words, please."]) == (
        "Answer in under 40 words, please."
    )
    assert select_hint(["ok", None, "wrong"]) is None


def test_feedback_becomes_a_hint_with_its_tags() -> None:
    assert feedback_hint(comment=" Be brief ", correction="", tags=[]) == "Be brief"
    assert feedback_hint(comment="", correction="Sure! Paris.", tags=["too long"]) == (
        "Sure! Paris. (Reasons: too long.)"
    )
    assert feedback_hint(comment="", correction="", tags=["wrong style"]) == "Reasons: wrong style."
    assert feedback_hint(comment="", correction="", tags=[]) is None
