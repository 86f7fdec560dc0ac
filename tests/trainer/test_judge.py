"""PRM votes, majority, hints: pure functions, no model."""

from __future__ import annotations

import doctest

import pytest

import trainer.judge
from trainer.judge import (
    VOTE_CHOICES,
    build_hint_messages,
    build_prm_messages,
    extract_hint,
    feedback_hint,
    is_grounded,
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
        ([None, None, 1], 1),
        ([None, 1, 1], 1),
        ([None, 1, -1], 0),
        ([None, None, None], 0),
        ([None, -1, 0], 0),
        ([None, None, -1], -1),
        ([], 0),
        ([0, 0, 1], 0),
    ],
)
def test_majority_leaves_unparseable_votes_out_and_a_tie_is_zero(votes, result) -> None:
    assert majority(votes) == result


def test_the_judge_prompt_contains_request_answer_and_next_state() -> None:
    text = "\n".join(
        m["content"]
        for m in build_prm_messages(request="REQ-123", answer="ANS-456", next_state="NEXT-789")
    )
    assert "REQ-123" in text and "ANS-456" in text and "NEXT-789" in text
    assert "\\boxed{1}" in text and "\\boxed{-1}" in text and "\\boxed{0}" in text
    assert all(parse_vote(choice) is not None for choice in VOTE_CHOICES)
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


def _needed(hint: str) -> str:
    return f"\\boxed{{1}} [HINT_START]{hint}[HINT_END]"


def test_the_longest_useful_hint_wins() -> None:
    replies = [
        None,
        _needed("ok"),
        _needed("Use bullet points."),
        _needed("Answer in under 40 words, please."),
    ]
    assert select_hint(replies) == "Answer in under 40 words, please."
    assert select_hint([_needed("ok"), None, _needed("wrong"), ""]) is None


def test_a_hint_is_taken_only_when_the_judge_says_one_is_needed() -> None:
    assert select_hint(["\\boxed{-1} [HINT_START]Answer in under 40 words.[HINT_END]"]) is None
    assert select_hint(["[HINT_START]Answer in under 40 words.[HINT_END]"]) is None
    assert select_hint(["\\boxed{1} but no hint block"]) is None


@pytest.mark.parametrize(
    "hint",
    [
        "No hint needed.",
        "No changes are needed; the answer was fine.",
        "The answer was already perfect.",
        "Nothing would have helped.",
        "Perfect, exactly what I wanted!",
        "Great answer, thanks a lot!",
        "To find the second-to-last uppercase letter, you need to find the third-to-last "
        "uppercase letter. ### Instruction",
        "Be concise.\nUser: what is 2+2?",
        "Use <|im_start|> tags in the answer.",
    ],
)
def test_no_hint_sentences_praise_and_template_debris_are_not_hints(hint) -> None:
    assert not is_useful_hint(hint)
    assert select_hint([_needed(hint)]) is None


def test_a_judge_hint_must_be_grounded_in_the_next_state() -> None:
    nonsense = (
        "To find the second-to-last uppercase letter, you need to find the third-to-last "
        "uppercase letter."
    )
    evidence = "[user] all in lowercase please, I told you twice"
    assert is_useful_hint(nonsense) and not is_grounded(nonsense, evidence)
    assert select_hint([_needed(nonsense)], evidence=evidence) is None
    grounded = "Write the whole answer in lowercase."
    assert select_hint([_needed(nonsense), _needed(grounded)], evidence=evidence) == grounded
    tool = "[tool result call_2] Error: file 'reprot.txt' not found"
    assert is_grounded("Check the file name: report.txt, not reprot.txt.", tool)


def test_feedback_becomes_a_hint_with_its_tags() -> None:
    assert feedback_hint(comment=" Be brief ", correction="", tags=[]) == "Be brief"
    assert feedback_hint(comment="", correction="Sure! Paris.", tags=["too long"]) == (
        "Sure! Paris. (Reasons: too long.)"
    )
    assert feedback_hint(comment="", correction="", tags=["wrong style"]) == "Reasons: wrong style."
    assert feedback_hint(comment="", correction="", tags=[]) is None
