"""The simulated user and its preferences: each kind of feedback, loops disliked and never
rewritten, the prompt file's splits."""

from __future__ import annotations

import bench.common
import bench.replay
import bench.replay_figures
import bench.replay_options
import bench.sweep
from bench.preferences import LOOP_COMMENT, Preference, answer_flaws, load_prompts
from bench.simulated_user import Answer, judged_sample, react
from tests.trainer.replay_helpers import LOOP, LOOP_IDS, SURE
from tests.trainer.tiny import byte_tokenizer


def test_the_simulated_user_gives_each_kind_of_feedback() -> None:
    tokenizer = byte_tokenizer()
    prompt = [3, 4, 5]
    answer = Answer("What is gravity?", prompt, [6, 7], [-1.0, -2.0], "Gravity pulls.")
    ids = answer.response_token_ids
    thumbs = react(SURE, answer.text, "thumbs", token_ids=ids)
    assert (thumbs.rating, thumbs.comment, thumbs.correction) == (-1, "", "")
    sample, _ = judged_sample(answer, thumbs, tokenizer)
    assert sample.reward == -1.0 and sample.hint is None
    corrected = react(SURE, answer.text, "corrections", token_ids=ids)
    sample, _ = judged_sample(answer, corrected, tokenizer)
    assert corrected.correction == "Sure! Gravity pulls."
    assert sample.hint == SURE.comment and sample.correction_token_ids[-1] == 2  # eos
    told = react(SURE, answer.text, "next_state", token_ids=ids)
    assert told.rating == 0 and told.next_state.startswith("[user] No,")
    sample, verdict = judged_sample(answer, told, tokenizer)
    assert verdict.score == -1 and sample.reward == -1.0
    # the judge takes what the user asks for, not their complaint: the comment's own words
    assert sample.hint == SURE.comment
    assert sample.teacher_prompt_token_ids != prompt
    thanked = react(SURE, "Sure! Gravity pulls.", "next_state", token_ids=ids)
    sample, verdict = judged_sample(answer, thanked, tokenizer)
    assert verdict.score == 1 and sample.reward == 1.0 and sample.hint is None


def test_the_preferences_doctests_hold() -> None:
    import doctest

    import bench.preferences

    result = doctest.testmod(bench.preferences)
    assert result.attempted > 0 and result.failed == 0


def test_a_looping_answer_meets_no_preference_however_it_begins() -> None:
    assert SURE.satisfied(LOOP) and not SURE.meets(LOOP, LOOP_IDS)
    assert answer_flaws(LOOP, LOOP_IDS) == ["repeating"]
    assert SURE.meets("Sure! Gravity pulls.", [1, 2, 3, 4])
    assert not SURE.meets("   ", [5])  # empty
    no_emoji = Preference.from_dict({"name": "n", "comment": "c", "rules": {"no_emoji": True}})
    assert not no_emoji.meets("", [])


def test_the_simulated_user_dislikes_a_loop_and_does_not_rewrite_it() -> None:
    tokenizer = byte_tokenizer()
    for feedback in ("thumbs", "comments", "corrections"):
        reaction = react(SURE, LOOP, feedback, token_ids=LOOP_IDS)
        assert reaction.truth == -1 and reaction.rating == -1
        assert reaction.correction == ""  # a rewritten loop would teach the loop
    corrected = react(SURE, LOOP, "corrections", token_ids=LOOP_IDS)
    assert corrected.comment == LOOP_COMMENT  # it does start with "Sure!": only the loop is said
    missed = react(SURE, "Paris Paris Paris Paris", "corrections", token_ids=[9] * 4)
    assert missed.comment == f"{SURE.comment} {LOOP_COMMENT}" and missed.correction == ""
    empty = react(SURE, " ", "comments", token_ids=[5])
    assert empty.comment.startswith(SURE.comment) and "did not answer" in empty.comment
    told = react(SURE, LOOP, "next_state", token_ids=LOOP_IDS)
    answer = Answer("What is gravity?", [3, 4, 5], LOOP_IDS, [-1.0] * len(LOOP_IDS), LOOP)
    sample, verdict = judged_sample(answer, told, tokenizer)
    assert verdict.score == -1 and sample.reward == -1.0 and sample.hint == LOOP_COMMENT


def test_the_prompt_file_keeps_the_old_split_and_adds_other_kinds() -> None:
    prompts = load_prompts(bench.common.ROOT / "bench" / "data" / "prompts.json")
    assert len(prompts["held_out"]) == 12 and len(prompts["train"]) == 24
    other = prompts["held_out_other"]
    assert len(other) >= 12 and not set(other) & set(prompts["train"] + prompts["held_out"])
    words = lambda items: sum(len(p.split()) for p in items) / len(items)  # noqa: E731
    assert words(other) > 2 * words(prompts["held_out"])  # longer requests, not paraphrases
