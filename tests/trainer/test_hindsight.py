"""The hindsight judge (trainer.hindsight): the follow-up itself is the teacher's hint."""

from __future__ import annotations

import pytest

from trainer.hindsight import MAX_FOLLOWUP_CHARS, followup_text, hindsight_hint
from trainer.judge import judge_verdict


def _no_llm(messages, n, choices=None):
    raise AssertionError("the hindsight judge asks no model")


def _verdict(next_state: str, *, rating: int = 0, user_hint: str | None = None):
    return judge_verdict(
        kind="hindsight",
        request="How far is Paris from Lyon?",
        answer="About 290 miles.",
        next_state=next_state,
        rating=rating,
        user_hint=user_hint,
        m=1,
        complete=_no_llm,
    )


@pytest.mark.parametrize(
    "said",
    ["in km please", "Nein, in Kilometern bitte.", "请用公里。", "lol no, use metric"],
)
def test_the_follow_up_in_any_language_is_the_hint_word_for_word(said) -> None:
    verdict = _verdict(f"[user] {said}")
    assert verdict.hint == hindsight_hint(f"[user] {said}")
    assert said in verdict.hint


def test_the_score_is_the_cue_judges_and_a_new_question_still_gives_context() -> None:
    assert _verdict("[user] No, that's wrong. Use kilometres.").score == -1
    neutral = _verdict("[user] What is a good book to read this summer?")
    assert neutral.score == 0 and neutral.hint is not None


@pytest.mark.parametrize("said", ["Thanks, perfect!", "Danke!", "谢谢", "ok"])
def test_thanks_and_trivial_replies_are_no_hint(said) -> None:
    assert _verdict(f"[user] {said}").hint is None


def test_the_users_own_comment_outranks_the_follow_up() -> None:
    verdict = _verdict("[user] hmm", rating=-1, user_hint="Answer in kilometres.")
    assert verdict.hint == "Answer in kilometres." and verdict.score == -1


def test_tool_results_and_an_ended_conversation_give_no_follow_up() -> None:
    assert followup_text("[tool result call_1] {'error': 'timeout'}") == ""
    assert _verdict("(The user ended the conversation here without replying.)").hint is None


def test_a_pasted_document_is_cut() -> None:
    assert len(followup_text("[user] " + "x" * 5000)) == MAX_FOLLOWUP_CHARS
