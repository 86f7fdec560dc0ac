"""Content preferences (vegetarian, metric units, call me Sam, no jargon, Python code): each
checker on hand-written answers that meet it and that miss it, the rule kinds behind them, and
the prompts where each preference matters."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.preferences import (
    Preference,
    code_fences,
    load_preferences,
    load_prompts,
    prompts_for,
    rules_hold,
)

DATA = Path(__file__).parents[2] / "bench" / "data"
PREFERENCES = {p.name: p for p in load_preferences(DATA / "preferences.json")}
CONTENT = ("vegetarian", "metric-units", "call-me-sam", "beginner-no-jargon", "python-code")

MEETS = {
    "vegetarian": [
        "Boil spaghetti, then toss it with garlic, olive oil, chilli and parsley.",
        "Try a lentil soup: onions, carrots, red lentils, cumin and vegetable stock.",
        "For the picnic: hummus, falafel wraps, a tomato salad and lemon cake.",
    ],
    "metric-units": [
        "Edinburgh is about 650 km from London by road.",
        "Bake the bread at 220 °C for 30 minutes.",
        "An adult elephant weighs 4,000 to 7,000 kilograms.",
        "It takes about two hours by train.",  # no unit at all: nothing to convert
    ],
    "call-me-sam": ["Good morning, Sam! Today is yours.", "You can do it, Sam."],
    "beginner-no-jargon": [
        "Cloud computing means using someone else's computers over the internet.",
        "A mortgage is a loan to buy a home, paid back bit by bit over many years.",
    ],
    "python-code": [
        "Use the csv module:\n\n```python\nimport csv\nwith open('a.csv') as f:\n"
        "    rows = list(csv.reader(f))\n```",
        "Like this:\n```\nprint(s[::-1])\n```\nThat reverses the string.",
    ],
}
MISSES = {
    "vegetarian": [
        "Fry some bacon, then add it to the pasta.",
        "A classic: chicken noodle soup.",
        "Add two anchovies and a splash of fish sauce.",
        "Grill salmon fillets and shrimps on skewers.",
    ],
    "metric-units": [
        "It's about 400 miles by road.",
        "Bake the bread at 450°F for 30 minutes.",
        "An adult elephant weighs up to 14,000 pounds.",
        "The Eiffel Tower is 1,083 feet tall.",
        "Bake it at 200 degrees for 30 minutes.",  # degrees of what?
    ],
    "call-me-sam": ["Good morning! Today is yours.", "You can do it, samurai."],
    "beginner-no-jargon": [
        "The client sends an HTTP request over TCP and the server replies.",
        "Your monthly payment covers interest and principal, with the house as collateral.",
        "Vaccines present an antigen so the immune system learns the pathogen.",
    ],
    "python-code": [
        "```javascript\nconsole.log(s.split('').reverse().join(''));\n```",
        "Use reversed(s) and join the characters.",  # no code block at all
        "```\nfunction rev(s) { return s.split('').reverse().join(''); }\n```",
        "```python\nprint(1)\n```\nor in shell:\n```bash\necho 1\n```",
    ],
}


@pytest.mark.parametrize(("name", "answer"), [(n, a) for n in CONTENT for a in MEETS[n]])
def test_a_content_preference_is_met_by_an_answer_that_honours_it(name: str, answer: str) -> None:
    assert PREFERENCES[name].satisfied(answer)


@pytest.mark.parametrize(("name", "answer"), [(n, a) for n in CONTENT for a in MISSES[n]])
def test_a_content_preference_is_missed_by_an_answer_that_ignores_it(
    name: str, answer: str
) -> None:
    assert not PREFERENCES[name].satisfied(answer)


def test_call_me_sam_is_fixed_by_addressing_the_user_and_the_fix_meets_it() -> None:
    sam = PREFERENCES["call-me-sam"]
    fixed = sam.correct("Good morning! Today is yours.")
    assert fixed == "Sam, Good morning! Today is yours." and sam.satisfied(fixed)


@pytest.mark.parametrize("name", CONTENT)
def test_each_content_preference_names_its_own_prompts_held_out_on_other_prompts(name: str) -> None:
    prompts = PREFERENCES[name].prompts
    assert len(prompts["train"]) >= 16 and len(prompts["held_out"]) >= 12
    assert not set(prompts["train"]) & set(prompts["held_out"])


@pytest.mark.parametrize("name", PREFERENCES)
def test_each_preference_has_follow_ups_in_english_german_and_chinese(name: str) -> None:
    followups = PREFERENCES[name].followups
    assert {"en", "de", "zh"} <= set(followups)
    assert len(followups["en"]) >= 3 and all(len(followups[k]) >= 2 for k in ("de", "zh"))


def test_prompts_for_picks_the_preferences_own_splits_or_the_shared_ones() -> None:
    shared = load_prompts(DATA / "prompts.json")
    assert prompts_for(PREFERENCES["no-emoji"], shared) == shared
    assert prompts_for(PREFERENCES["vegetarian"], shared) == PREFERENCES["vegetarian"].prompts


def test_words_must_not_matches_whole_words_and_their_plurals_case_blind() -> None:
    rules = {"words_must_not": ["ham", "inch", "°F"]}
    assert not rules_hold("Two HAMS.", rules) and not rules_hold("six inches", rules)
    assert not rules_hold("at 350°F", rules)
    assert rules_hold("Hamburg is lovely; a chinchilla.", rules)


def test_words_any_needs_one_of_the_words() -> None:
    assert rules_hold("Hi Sam", {"words_any": ["sam", "samuel"]})
    assert not rules_hold("Hi samurai", {"words_any": ["sam"]})


def test_if_matches_applies_its_rules_only_where_the_pattern_matches() -> None:
    rules = {"if_matches": {r"\d\s*°": {"regex_must": ["°C"]}}}
    assert rules_hold("No temperature here.", rules)
    assert rules_hold("It is 20 °C.", rules)
    assert not rules_hold("It is 20 °.", rules)


def test_code_blocks_counts_fences_and_checks_each_tag() -> None:
    text = "```Python\nx = 1\n```\ntext\n```\ny = 2\n```"
    assert code_fences(text) == ["python", ""]
    assert rules_hold(text, {"code_blocks": {"languages": ["python", ""], "min": 2}})
    assert not rules_hold(text, {"code_blocks": {"languages": ["python"], "min": 1}})
    assert not rules_hold("no code", {"code_blocks": {"languages": ["python"], "min": 1}})


@pytest.mark.parametrize(
    "data",
    [
        {"name": "x", "comment": "c", "rules": {"words_must": ["a"]}},
        {"name": "x", "comment": "c", "rules": {"if_matches": {"a": {"nonsense": 1}}}},
        {"name": "x", "comment": "c", "rules": {"if_matches": {"a": {}}}},
        {"name": "x", "comment": "c", "rules": {"no_emoji": True}, "prompts": {"train": ["a"]}},
        {
            "name": "x",
            "comment": "c",
            "rules": {"no_emoji": True},
            "prompts": {"train": ["a"], "held_out": ["a"]},
        },
    ],
)
def test_a_preference_with_an_unknown_rule_or_bad_prompts_is_refused(data: dict) -> None:
    with pytest.raises(ValueError):
        Preference.from_dict(data)
