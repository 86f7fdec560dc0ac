"""The cue judge in German, Chinese, French and Spanish, and on requests to change an answer:
invariants on hand-written messages, and its accuracy on the labelled sets it was not written
on (bench/data/next_states_multilingual.json's heldout half). Pure: no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.judge import is_grounded, is_useful_hint, judge_verdict, parse_vote
from trainer.judge_cues import cue_hint, cue_score, cue_vote

DATA = Path(__file__).parents[2] / "bench" / "data"


def _cases(name: str, split: str) -> list[dict]:
    cases = json.loads((DATA / name).read_text())["cases"]
    return [c for c in cases if split == "all" or c["split"] == split]


def _right(cases: list[dict]) -> float:
    return sum(cue_score(c["next_state"], request=c["request"]) == c["label"] for c in cases) / len(
        cases
    )


def _user(text: str) -> str:
    return f"[user] {text}"


@pytest.mark.parametrize(
    "text",
    [
        "Shorter please.",
        "Could you use metric units instead?",
        "You're not listening. Lowercase!",
        "Bitte kürzer.",
        "Ohne Emojis bitte.",
        "能不能简短一点？",
        "我是素食者，别放肉",
        "Plus court, s'il te plaît.",
        "Más corto, por favor.",
    ],
)
def test_a_request_to_change_the_answer_is_minus_one(text: str) -> None:
    assert cue_score(_user(text)) == -1


@pytest.mark.parametrize(
    "text",
    ["Thanks! Could you make it shorter?", "Danke, aber bitte kürzer.", "谢谢，不过能再短一点吗？"],
)
def test_a_request_after_thanks_is_still_minus_one(text: str) -> None:
    assert cue_score(_user(text)) == -1


@pytest.mark.parametrize(
    "text",
    [
        "Danke, genau das wollte ich!",
        "Perfekt, hat funktioniert.",
        "谢谢，正是我想要的！",
        "讲得很清楚，明白了",
        "Merci, c'est parfait !",
        "¡Gracias, justo lo que necesitaba!",
    ],
)
def test_thanks_in_any_of_the_languages_is_plus_one(text: str) -> None:
    assert cue_score(_user(text)) == 1


@pytest.mark.parametrize(
    "text",
    [
        "Nein, das stimmt nicht. Die Hauptstadt ist Canberra.",
        "不对，应该是1989年。",
        "你算错了，7乘8等于56。",
        "Non, c'est faux.",
        "No, eso está mal.",
    ],
)
def test_a_correction_in_any_of_the_languages_is_minus_one(text: str) -> None:
    assert cue_score(_user(text)) == -1


@pytest.mark.parametrize(
    "text",
    [
        "Not bad at all, worked first time.",
        "Kein Problem, passt schon. Danke!",
        "没问题，谢谢！",
        "还不错",
    ],
)
def test_idioms_that_look_negative_are_not_complaints(text: str) -> None:
    assert cue_score(_user(text)) == 1


@pytest.mark.parametrize(
    "text", ["That wasn't helpful.", "Das funktioniert nicht.", "这个不太清楚", "没有用"]
)
def test_a_negated_positive_word_is_not_approval(text: str) -> None:
    assert cue_score(_user(text)) == -1


@pytest.mark.parametrize(
    "text",
    [
        "Great, another wall of text. Exactly what I needed.",
        "Na toll, danke für gar nichts.",
        "呵呵，说了等于没说。",
    ],
)
def test_sarcasm_outweighs_the_praise_words_in_it(text: str) -> None:
    assert cue_score(_user(text)) == -1


@pytest.mark.parametrize(
    "text",
    [
        "Und für vier Personen?",
        "Wie funktioniert das genau?",
        "Wann findet das statt?",
        "不好意思，再问一下，明天几点开门？",
        "换个话题：纽约现在几点？",
        "嗯",
        "Okay.",
        "¿Y cuánto cuesta la entrada?",
    ],
)
def test_a_neutral_follow_up_or_new_question_is_zero(text: str) -> None:
    assert cue_score(_user(text)) == 0


@pytest.mark.parametrize(
    "next_state",
    [
        "[tool result call_1] Fehler: Datei 'bericht.txt' nicht gefunden",
        "[tool result call_2] 错误：找不到文件 'report.txt'",
    ],
)
def test_a_tool_error_in_german_or_chinese_is_minus_one(next_state: str) -> None:
    assert cue_score(next_state) == -1


@pytest.mark.parametrize(
    ("next_state", "hint"),
    [
        ("[user] Bitte kürzer.", "Bitte kürzer."),
        ("[user] Nein, das stimmt nicht. Bitte kürzer.", "Bitte kürzer."),
        ("[user] 能不能简短一点？", "能不能简短一点？"),
        ("[user] 不对。请用公制单位。", "请用公制单位。"),
        ("[user] 我是素食者，别放肉", "我是素食者，别放肉"),
        ("[user] Danke, aber bitte in Celsius.", "Danke, aber bitte in Celsius."),
    ],
)
def test_the_cue_hint_keeps_a_german_or_chinese_request_verbatim(
    next_state: str, hint: str
) -> None:
    assert cue_hint(next_state) == hint


@pytest.mark.parametrize(
    "text", ["Nochmal bitte, aber diesmal richtig.", "重新写一个。", "不对", "Falsch."]
)
def test_a_bare_verdict_in_german_or_chinese_gives_no_hint(text: str) -> None:
    assert cue_hint(_user(text)) is None


@pytest.mark.parametrize(
    "text", ["Bitte kürzer.", "能不能简短一点？", "请用公制单位。", "我是素食者，别放肉"]
)
def test_the_judge_takes_a_short_german_or_chinese_request_as_its_hint(text: str) -> None:
    verdict = judge_verdict(
        kind="cues",
        request="Explain photosynthesis.",
        answer="Photosynthesis is ...",
        next_state=_user(text),
        rating=0,
        user_hint=None,
        m=1,
        complete=lambda *args: [],
    )
    assert (verdict.score, verdict.hint) == (-1, text)


def test_a_cjk_hint_counts_its_characters_as_words_and_is_grounded_by_character_pairs() -> None:
    assert is_useful_hint("请用公制单位。") and not is_useful_hint("好的")
    assert is_grounded("请用公制单位", "[user] 不对，请用公制单位。")
    assert not is_grounded("请用公制单位", "[user] 太长了")


def test_every_multilingual_vote_parses_to_the_score_it_states() -> None:
    for case in _cases("next_states_multilingual.json", "all"):
        score, text = cue_vote(case["next_state"], request=case["request"])
        assert parse_vote(text) == score


def test_the_cue_judge_is_right_on_nine_in_ten_heldout_cases_in_three_languages() -> None:
    heldout = _cases("next_states_multilingual.json", "heldout")
    assert _right(heldout) >= 0.9
    for language in ("en", "de", "zh"):
        assert _right([c for c in heldout if c["language"] == language]) >= 0.85, language


def test_the_cue_judge_keeps_its_accuracy_on_the_english_set_it_was_first_written_on() -> None:
    assert _right(_cases("next_states.json", "tune")) == 1.0
    assert _right(_cases("next_states.json", "heldout")) >= 35 / 36


def test_the_cue_judge_is_right_on_the_set_its_latest_rules_were_written_on() -> None:
    # next_states_fresh.json: 35/45 on cues-v3, before cues-v4 was written on its misses.
    assert _right(_cases("next_states_fresh.json", "tune")) == 1.0


def test_the_cue_judge_stays_above_its_floor_on_a_set_written_blind_to_its_rules() -> None:
    # next_states_blind.json (en, de, zh, fr, ja) was scored once on cues-v4 and never tuned
    # on: 73/102. A floor, not the goal (nine in ten): a list of phrases does not get there.
    assert _right(_cases("next_states_blind.json", "heldout")) >= 73 / 102
