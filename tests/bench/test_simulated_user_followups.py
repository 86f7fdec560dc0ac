"""The simulated user's natural follow-ups (feedback kind "followups"): what they write on a miss
and a hit, in English, German and Chinese, how often they move on to a new question, and that
the old kinds keep their meaning. Pure: no model."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.preferences import Preference, load_preferences
from bench.simulated_user import (
    FEEDBACK_KINDS,
    NEGATIVE_NEXT,
    NEW_QUESTIONS,
    POSITIVE_NEXT,
    THANKS,
    Answer,
    judged_sample,
    react,
)
from tests.trainer.tiny import byte_tokenizer
from trainer.judge_cues import cue_score

DATA = Path(__file__).parents[2] / "bench" / "data"
PREFERENCES = {p.name: p for p in load_preferences(DATA / "preferences.json")}
METRIC = PREFERENCES["metric-units"]
MISS, HIT = "It is about 400 miles.", "It is about 650 km."
IDS = [5, 6, 7, 8, 9, 10]  # no loop


def _reactions(answer: str, *, language: str = "en", turns: int = 60, **kw):
    return [
        react(METRIC, answer, "followups", token_ids=IDS, language=language, turn=t, **kw)
        for t in range(turns)
    ]


def test_followups_is_a_new_kind_and_next_state_keeps_its_fixed_sentences() -> None:
    assert FEEDBACK_KINDS[:4] == ("thumbs", "comments", "corrections", "next_state")
    assert "followups" in FEEDBACK_KINDS
    missed = react(METRIC, MISS, "next_state", token_ids=IDS)
    assert missed.next_state == "[user] " + NEGATIVE_NEXT.format(comment=METRIC.comment)
    assert react(METRIC, HIT, "next_state", token_ids=IDS).next_state == f"[user] {POSITIVE_NEXT}"


@pytest.mark.parametrize("language", ["en", "de", "zh"])
def test_a_miss_is_answered_with_the_preferences_own_follow_ups_in_the_users_language(
    language: str,
) -> None:
    said = {r.next_state.removeprefix("[user] ") for r in _reactions(MISS, language=language)}
    new_questions = set(NEW_QUESTIONS[language])
    assert said - new_questions <= set(METRIC.followups[language])
    assert len(said - new_questions) >= 2  # several phrasings, not one fixed sentence


@pytest.mark.parametrize("language", ["en", "de", "zh"])
def test_a_hit_is_answered_with_one_of_several_thanks(language: str) -> None:
    said = {r.next_state.removeprefix("[user] ") for r in _reactions(HIT, language=language)}
    assert said - set(NEW_QUESTIONS[language]) <= set(THANKS[language])
    assert len(said - set(NEW_QUESTIONS[language])) >= 2


def test_the_truth_is_the_preference_whatever_the_user_writes() -> None:
    assert {r.truth for r in _reactions(MISS)} == {-1}
    assert {r.truth for r in _reactions(HIT)} == {1}


def test_about_a_quarter_of_the_turns_move_on_to_a_new_question_and_say_so() -> None:
    reactions = _reactions(MISS, turns=400)
    neutral = [r for r in reactions if r.neutral]
    assert 0.18 <= len(neutral) / len(reactions) <= 0.32
    assert all(r.next_state.removeprefix("[user] ") in NEW_QUESTIONS["en"] for r in neutral)
    assert not any(r.neutral for r in _reactions(MISS, neutral_share=0.0))


def test_the_same_seed_and_turn_give_the_same_follow_up_and_another_seed_varies() -> None:
    assert _reactions(MISS) == _reactions(MISS)
    assert _reactions(MISS, seed=1) != _reactions(MISS)
    by_text = react(METRIC, MISS, "followups", token_ids=IDS)  # seeded by the answer's text
    assert by_text == react(METRIC, MISS, "followups", token_ids=IDS)


def test_an_unknown_language_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown language"):
        react(METRIC, MISS, "followups", token_ids=IDS, language="tlh")


def test_a_broken_answer_is_told_in_the_users_language_after_the_miss() -> None:
    loop, loop_ids = "Sure! Sure! Sure! Sure!", [7, 8] * 6
    sure = PREFERENCES["starts-with-sure"]
    told = react(sure, loop, "followups", token_ids=loop_ids, language="de", neutral_share=0)
    assert told.truth == -1 and told.next_state.endswith(
        "Du wiederholst dich ständig, bitte nur einmal antworten."
    )


def test_a_preference_without_follow_ups_in_a_language_falls_back_to_english_then_its_comment():
    bare = Preference.from_dict({"name": "b", "comment": "Be brief.", "rules": {"max_words": 1}})
    told = react(bare, "two words", "followups", token_ids=IDS, language="zh", neutral_share=0)
    assert told.next_state == "[user] Be brief."
    english = Preference.from_dict(
        {"name": "e", "comment": "c", "rules": {"max_words": 1}, "followups": {"en": ["Shorter!"]}}
    )
    told = react(english, "two words", "followups", token_ids=IDS, language="de", neutral_share=0)
    assert told.next_state == "[user] Shorter!"


@pytest.mark.parametrize("language", ["en", "de", "zh"])
def test_the_cue_judge_reads_every_thanks_as_plus_one_and_every_new_question_as_zero(
    language: str,
) -> None:
    assert {cue_score(f"[user] {t}") for t in THANKS[language]} == {1}
    assert {cue_score(f"[user] {q}") for q in NEW_QUESTIONS[language]} == {0}


def test_a_german_follow_up_becomes_a_sample_with_its_words_as_the_hint() -> None:
    short = Preference.from_dict(
        {
            "name": "s",
            "comment": "Shorter.",
            "rules": {"max_words": 2},
            "followups": {"de": ["Bitte kürzer."]},
        }
    )
    answer = Answer(
        "Was ist Schwerkraft?", [3, 4], [6, 7], [-1.0, -2.0], "Eine lange Antwort hier."
    )
    told = react(short, answer.text, "followups", token_ids=IDS, language="de", neutral_share=0)
    sample, verdict = judged_sample(answer, told, byte_tokenizer())
    assert verdict.score == -1 and sample.reward == -1.0 and sample.hint == "Bitte kürzer."


def test_a_new_question_gives_no_sample() -> None:
    answer = Answer("How far?", [3, 4], [6, 7], [-1.0, -2.0], MISS)
    told = react(METRIC, MISS, "followups", token_ids=IDS, neutral_share=1.0)
    assert told.neutral
    sample, verdict = judged_sample(answer, told, byte_tokenizer())
    assert sample is None and verdict.score == 0
