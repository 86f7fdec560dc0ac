"""The cue judge in German, Chinese, French, Spanish, Italian, Portuguese, Russian, Japanese and
Korean, on requests to change an answer and on new questions after one: invariants on
hand-written messages, its lexicon (trainer/data/judge_lexicon.json), every case of the sets
its rules were written on, and its accuracy on the labelled sets it was not written on
(bench/data/next_states_multilingual.json's heldout half). Pure: no model."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import trainer.judge_cues
import trainer.judge_lexicon
from trainer.judge import is_grounded, is_useful_hint, judge_verdict, parse_vote
from trainer.judge_cues import cue_hint, cue_score, cue_vote
from trainer.judge_lexicon import LEXICON_PATH, PATTERN_CLASSES, load_lexicon

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
    assert _right(_cases("next_states_blind.json", "heldout")) >= 76 / 102  # cues-v5


NEW_LANGUAGES = ("it", "pt", "ru", "ja", "ko")


def test_doctests_hold() -> None:
    assert doctest.testmod(trainer.judge_cues).failed == 0
    assert doctest.testmod(trainer.judge_lexicon).failed == 0


def test_the_lexicon_is_data_beside_the_module_with_every_language_and_class() -> None:
    assert (
        LEXICON_PATH == Path(trainer.judge_lexicon.__file__).parent / "data" / "judge_lexicon.json"
    )
    lexicon = load_lexicon()
    assert load_lexicon() is lexicon  # read once
    for language in ("en", "de", "fr", "es", "zh", *NEW_LANGUAGES):
        for cue_class in ("positive", "negative", "request", "contrast", "new_request"):
            assert lexicon.patterns(cue_class, language), (language, cue_class)
    classes = json.loads(LEXICON_PATH.read_text())["classes"]
    assert set(classes) == set(PATTERN_CLASSES) | {"stopwords", "verdict_words"}


def test_the_lexicon_refuses_an_unknown_class_or_a_pattern_that_does_not_compile(
    tmp_path: Path,
) -> None:
    for section in ({"thanks": ["merci"]}, {"positive": ["(unclosed"]}, {"positive": ["$NOPE"]}):
        path = tmp_path / "lexicon.json"
        path.write_text(json.dumps({"languages": {"fr": section}}))
        with pytest.raises(ValueError):
            load_lexicon.__wrapped__(path)


@pytest.mark.parametrize(
    "text",
    [
        "Perfetto, grazie mille!",
        "Ha funzionato, sei un genio!",
        "Non c'è problema, grazie!",
        "Valeu, ficou ótimo!",
        "Obrigado, era exatamente isso!",
        "Sem problemas, obrigado pela ajuda!",
        "Спасибо, отлично!",
        "Мне очень помогло, спасибо!",
        "Не за что!",
        "Ничего страшного, спасибо за помощь!",
        "ありがとうございます、完璧です！",
        "大丈夫です、よく分かりました。",
        "問題ないです、ありがとうございます。",
        "감사합니다, 완벽해요!",
        "괜찮아요, 덕분에 해결됐어요!",
        "문제없어요, 고마워요!",
    ],
)
def test_thanks_and_polite_idioms_that_look_negative_in_the_new_languages_are_plus_one(
    text: str,
) -> None:
    assert cue_score(_user(text)) == 1


@pytest.mark.parametrize(
    "text",
    [
        "No, è sbagliato: è caduto nel 1989.",
        "Non funziona, dà ancora errore.",
        "Grazie, ma puoi metterlo in una tabella?",
        "Più corto, per favore.",
        "Grazie per niente.",
        "Não, está errado. A capital é Camberra.",
        "Tenta de novo, isso não funcionou.",
        "Obrigada, mas pode responder em português?",
        "Obrigado por nada, hein.",
        "Нет, это неправильно.",
        "Попробуй ещё раз, это не то.",
        "Спасибо, но слишком длинно.",
        "Я вегетарианец, без мяса, пожалуйста.",
        "Спасибо за ничего.",
        "違います。1989年です。",
        "もう一度やり直してください。",
        "ありがとう、でも箇条書きにしてもらえますか？",
        "はいはい、それはどうも。",
        "아니요, 틀렸어요.",
        "아직도 안 돼요.",
        "고마워요, 근데 표로 정리해 줄 수 있어요?",
        "저는 채식주의자라서 고기 없이 알려 주세요.",
    ],
)
def test_a_correction_redo_request_or_sarcasm_in_the_new_languages_is_minus_one(
    text: str,
) -> None:
    assert cue_score(_user(text)) == -1


@pytest.mark.parametrize(
    "text",
    [
        "Come funziona il ciclo for?",
        "Non ho mai provato, è difficile?",
        "O que o professor disse sobre isso?",
        "Как это работает?",
        "Не могли бы вы привести пример на Python?",
        "ところで、緑茶と紅茶はどう違うのですか？",
        "大丈夫ですか？",
        "어떤 게 좋아요?",
        "이렇게 하면 안 돼요?",
    ],
)
def test_a_neutral_question_in_the_new_languages_is_zero(text: str) -> None:
    assert cue_score(_user(text)) == 0


@pytest.mark.parametrize(
    ("asked", "text", "score"),
    [
        ("What's the best time to visit Japan?", "I'm in the US though", 0),
        ("How do I boil an egg?", "And how do I cook rice?", 0),
        ("Write a haiku about autumn.", "Now write me a poem about cats", 0),
        ("Wie koche ich ein Ei?", "Und wie koche ich Reis?", 0),
        ("Как перевернуть строку в Python?", "Спасибо, отлично!", 1),
        ("Escreve uma mensagem de aniversário para a minha avó.", "Valeu, ficou ótimo!", 1),
    ],
)
def test_a_new_question_or_request_after_an_answer_is_not_a_complaint(
    asked: str, text: str, score: int
) -> None:
    assert cue_score(_user(text), request=asked) == score


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("Più corto, per favore.", "Più corto, per favore."),
        ("Нет, неправильно. Покороче, пожалуйста.", "Покороче, пожалуйста."),
        ("違います。もっと短くしてください。", "もっと短くしてください。"),
        ("아니요, 틀렸어요. 더 짧게 해 주세요.", "더 짧게 해 주세요."),
        ("No, è sbagliato. Riprova.", None),
        ("Não, está errado. Tenta de novo.", None),
        ("Нет, неправильно. Попробуй ещё раз.", None),
        ("違います。もう一度お願いします。", None),
        ("아니요, 틀렸어요. 다시 해 주세요.", None),
    ],
)
def test_the_cue_hint_keeps_a_request_and_drops_a_bare_verdict_in_the_new_languages(
    text: str, hint: str | None
) -> None:
    assert cue_hint(_user(text)) == hint


def test_the_cue_judge_is_right_on_every_case_of_the_languages_tune_set() -> None:
    cases = _cases("next_states_languages_tune.json", "tune")
    for language in NEW_LANGUAGES:
        assert len([c for c in cases if c["language"] == language]) >= 10, language
    for language in ("en", "de", "zh", "fr", "es"):
        assert len([c for c in cases if c["language"] == language]) >= 4, language
    wrong = [
        c["id"] for c in cases if cue_score(c["next_state"], request=c["request"]) != c["label"]
    ]
    assert wrong == []
