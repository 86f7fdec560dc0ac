"""The judge's verdict on one turn (score, votes, hint) with both judges, on the data the system
really produces: unparseable votes, empty hints, template debris. Pure: the model is a fake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.judge import VOTE_CHOICES, judge_verdict, parse_vote
from trainer.judge_cues import cue_hint, cue_vote, split_next_state

CASES = json.loads((Path(__file__).parents[2] / "bench/data/next_states.json").read_text())


class FakeModel:
    """Answers vote prompts and hint prompts from a script; records what it was asked."""

    def __init__(self, votes: list[str], hints: list[str]) -> None:
        self.votes, self.hints = votes, hints
        self.calls: list[tuple[str, int, tuple[str, ...] | None]] = []

    def __call__(self, messages, n, choices):
        kind = "hint" if "[HINT_START]" in messages[0]["content"] else "vote"
        self.calls.append((kind, n, choices))
        return (self.hints if kind == "hint" else self.votes)[:n]


def _judge(kind: str, next_state: str, model: FakeModel | None = None, **kw):
    args = {"request": "What is the capital of Italy?", "answer": "Paris.", "rating": 0}
    args.update(user_hint=None, m=3, complete=model or FakeModel([], []))
    args.update(kw)
    return judge_verdict(kind=kind, next_state=next_state, **args)


def test_the_default_judge_scores_a_correction_and_takes_the_users_words_as_hint() -> None:
    verdict = _judge("cues", "[user] No, that's wrong. Paris is in France.")
    assert verdict.score == -1
    assert [v["score"] for v in verdict.votes] == [-1] and "\\boxed{-1}" in verdict.votes[0]["text"]
    assert verdict.hint == "Paris is in France."


@pytest.mark.parametrize(
    ("next_state", "hint"),
    [
        # without its complaint the sentence reads as praise ("correct", "helpful") or is too
        # short to be a hint: the judge keeps the user's whole message, as cues-v1 did
        (
            "[user] No, that's wrong. The correct answer is Paris.",
            "No, that's wrong. The correct answer is Paris.",
        ),
        ("[user] Wrong. Keep it short and helpful.", "Wrong. Keep it short and helpful."),
        ("[user] No. French.", "No. French."),
        ("[user] That's wrong. Use C++.", "That's wrong. Use C++."),
        (
            "[user] No, that's not what I asked for. Please always start your answer with 'Sure!'",
            "Please always start your answer with 'Sure!'",
        ),
        ("[user] No, that's wrong. Try again.", None),
    ],
)
def test_the_judge_falls_back_to_the_whole_message_when_the_sentences_are_no_hint(
    next_state: str, hint: str | None
) -> None:
    assert _judge("cues", next_state).hint == hint


@pytest.mark.parametrize(
    ("next_state", "hint"),
    [
        # the complaint around the request is dropped: a teacher told "No, that's not what I
        # asked for." apologises instead of doing what was asked
        (
            "[user] No, that's not what I asked for. Please always start your answer with 'Sure!'",
            "Please always start your answer with 'Sure!'",
        ),
        ("[user] I said three synonyms. Try again.", "I said three synonyms."),
        (
            "[user] Way too long. One sentence means one sentence.",
            "One sentence means one sentence.",
        ),
        # a sentence that mixes the complaint with what is wanted is kept whole
        (
            "[user] I asked for lowercase. Please write it in lowercase.",
            "I asked for lowercase. Please write it in lowercase.",
        ),
        ("[user] Thanks, but I asked in Fahrenheit.", "Thanks, but I asked in Fahrenheit."),
        ("[user] No. Wrong. Try again!", None),
    ],
)
def test_the_cue_hint_keeps_what_the_user_asks_for_not_the_complaint(
    next_state: str, hint: str | None
) -> None:
    assert cue_hint(next_state) == hint


def test_praise_is_plus_one_and_asks_for_no_hint() -> None:
    verdict = _judge("cues", "[user] Perfect, exactly what I wanted!")
    assert (verdict.score, verdict.hint, verdict.hint_votes) == (1, None, [])


def test_a_bare_verdict_is_minus_one_without_a_hint() -> None:
    verdict = _judge("cues", "[user] No, that's wrong. Try again.")
    assert verdict.score == -1 and verdict.hint is None and verdict.hint_votes == ["\\boxed{-1}"]


def test_a_tool_error_is_minus_one_with_the_error_as_hint_and_success_is_plus_one() -> None:
    error = _judge("cues", "[tool result call_1] Error: file 'reprot.txt' not found")
    assert (
        error.score == -1 and error.hint == "The tool answered: Error: file 'reprot.txt' not found"
    )
    assert _judge("cues", '[tool result call_2] {"ok": true, "id": 4}').score == 1


def test_the_session_end_and_a_neutral_follow_up_are_zero() -> None:
    assert _judge("cues", "(The user ended the conversation here without replying.)").score == 0
    assert _judge("cues", "[user] And what about Spain?").score == 0


def test_the_llm_judge_leaves_unparseable_votes_out_and_keeps_them_all() -> None:
    model = FakeModel(
        ["The answer is not correct because", "", "\\boxed{-1}"],
        ["", "[HINT_START][HINT_END]", "\\boxed{1} [HINT_START]Rome is the capital.[HINT_END]"],
    )
    verdict = _judge("llm", "[user] No, that's wrong. Paris is in France.", model)
    assert [v["score"] for v in verdict.votes] == [None, None, -1]
    assert verdict.votes[0]["text"] == "The answer is not correct because"
    assert verdict.score == -1
    assert model.calls == [("vote", 3, VOTE_CHOICES), ("hint", 3, None)]
    assert verdict.hint is None  # "Rome is the capital." shares no word with the user's reply
    assert len(verdict.hint_votes) == 3


def test_the_nonsense_hint_of_the_lowercase_session_never_becomes_a_hint() -> None:
    nonsense = (
        "\\boxed{1} [HINT_START]To find the second-to-last uppercase letter, you need to find the "
        "third-to-last uppercase letter. ### Instruction[HINT_END]"
    )
    model = FakeModel(["\\boxed{-1}"] * 3, [nonsense, "no box", ""])
    verdict = _judge("llm", "[user] please, all lowercase. i asked you twice", model)
    assert verdict.score == -1 and verdict.hint is None


def test_no_parseable_vote_gives_zero_and_asks_for_no_hint() -> None:
    model = FakeModel(["I think", "hmm \\boxed{2}", ""], ["\\boxed{1} [HINT_START]x[HINT_END]"])
    verdict = _judge("llm", "[user] what?", model)
    assert verdict.score == 0 and [v["score"] for v in verdict.votes] == [None, None, None]
    assert [c[0] for c in model.calls] == ["vote"] and verdict.hint is None


def test_a_rating_is_the_score_and_the_users_hint_is_kept() -> None:
    model = FakeModel(["\\boxed{1}"] * 3, [])
    verdict = _judge("llm", "[user] thanks", model, rating=-1, user_hint="Be precise: it is Rome.")
    assert (verdict.score, verdict.votes, verdict.hint) == (-1, [], "Be precise: it is Rome.")
    assert model.calls == []


def test_an_unknown_judge_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown judge"):
        _judge("oracle", "[user] thanks")


def test_next_state_parts_are_split_by_their_labels() -> None:
    user, tools = split_next_state("[tool result c1] 42\n[tool result c2] line1\nline2\n[user] ok")
    assert tools == ["42", "line1\nline2"] and user == ["ok"]


@pytest.mark.parametrize("split", ["tune", "heldout"])
def test_the_cue_judge_is_right_on_the_labelled_next_states(split: str) -> None:
    cases = [c for c in CASES["cases"] if c["split"] == split]
    votes = [cue_vote(c["next_state"], request=c["request"]) for c in cases]
    assert all(parse_vote(text) == score for score, text in votes)
    right = sum(score == c["label"] for (score, _), c in zip(votes, cases, strict=True))
    assert right / len(cases) >= 0.9


def test_every_hint_the_cue_judge_takes_is_grounded_and_useful() -> None:
    for case in CASES["cases"]:
        if cue_vote(case["next_state"], request=case["request"])[0] == -1:
            verdict = _judge("cues", case["next_state"], request=case["request"])
            assert verdict.hint is None or verdict.hint == cue_hint(case["next_state"])
