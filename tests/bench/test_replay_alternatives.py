"""The replay's answers beside a bare 👎, as the webapp samples them: a group of the disliked
answer and the others, reward 0, claimed whole (the model stubbed at its one call)."""

from __future__ import annotations

import bench.replay_alternatives as replay_alternatives
from bench.replay_alternatives import with_alternatives
from bench.replay_claim import candidate
from bench.simulated_user import Answer, judged_sample, react
from tests.trainer.replay_helpers import SURE
from tests.trainer.tiny import byte_tokenizer
from trainer.claim import ClaimRules, claim


def test_a_bare_thumbs_down_comes_with_the_answers_sampled_beside_it(monkeypatch) -> None:
    tokenizer = byte_tokenizer()
    answer = Answer("What is gravity?", [3, 4, 5], [6, 7], [-1.0, -2.0], "Gravity pulls.")
    asked: list[list[str]] = []

    def generate(model, tokenizer, prompts, **kwargs):
        asked.append(list(prompts))
        return [
            Answer(p, [3, 4, 5], [8 + i, 9], [-0.5, -0.5], "Other.") for i, p in enumerate(prompts)
        ]

    monkeypatch.setattr(replay_alternatives, "generate", generate)
    thumbs = react(SURE, answer.text, "thumbs", token_ids=answer.response_token_ids)
    disliked, _ = judged_sample(answer, thumbs, tokenizer)

    def beside(sample, n: int = 3):
        return with_alternatives(
            sample,
            answer,
            model=None,
            tokenizer=tokenizer,
            n=n,
            max_new_tokens=8,
            temperature=0.7,
            seed=1,
        )

    group = beside(disliked)
    assert asked == [["What is gravity?"] * 3]
    assert [s.reward for s in group] == [-1.0, 0.0, 0.0, 0.0]
    assert len({s.group_id for s in group}) == 1 and group[0].group_id
    chosen = claim([candidate(s) for s in group], rules=ClaimRules(batch_size=2, fresh=0))
    assert len(chosen.batch) == 4  # a group is never split, whatever the batch size
    # A 👎 with a correction, and n = 0, come alone.
    corrected = react(SURE, answer.text, "corrections", token_ids=answer.response_token_ids)
    sample, _ = judged_sample(answer, corrected, tokenizer)
    assert beside(sample) == [sample] and beside(disliked, n=0) == [disliked]
    assert len(asked) == 1


def test_a_group_waits_whole_when_its_thumbs_down_is_left_fresh() -> None:
    from trainer.claim import Candidate

    older = [Candidate(n, True, True) for n in range(8)]
    group = [Candidate("👎", True, True, group="p"), Candidate("a", False, False, group="p")]
    chosen = claim([*older, *group], rules=ClaimRules(batch_size=16, fresh=1))
    assert chosen.fresh == ["👎"] and "a" not in chosen.batch and len(chosen.batch) == 8
    again = claim(group, rules=ClaimRules(batch_size=16, fresh=1), left_before={"👎"})
    assert again.batch == ["👎", "a"]  # the next update trains the group together


def test_pairs_the_user_chooses_the_first_answer_beside_it_that_meets_the_preference(
    monkeypatch,
) -> None:
    import doctest

    import bench.simulated_user

    assert doctest.testmod(bench.simulated_user).failed == 0
    tokenizer = byte_tokenizer()
    answer = Answer("What is gravity?", [3, 4, 5], [6, 7], [-1.0, -2.0], "Gravity pulls.")
    texts = iter([["No.", "Sure! It pulls.", "Sure! Mass attracts."], ["No.", "Nope.", "Hm."]])

    def generate(model, tokenizer, prompts, **kwargs):
        return [
            Answer(p, [3, 4, 5], [8 + i, 9], [-0.5, -0.5], text)
            for i, (p, text) in enumerate(zip(prompts, next(texts), strict=True))
        ]

    monkeypatch.setattr(replay_alternatives, "generate", generate)
    reaction = react(SURE, answer.text, "pairs", token_ids=answer.response_token_ids)
    assert reaction.rating == -1 and not reaction.comment  # a bare 👎, as thumbs
    disliked, _ = judged_sample(answer, reaction, tokenizer)
    common = {"model": None, "tokenizer": tokenizer, "n": 3, "max_new_tokens": 8}
    common |= {"temperature": 0.7, "seed": 1, "preference": SURE}
    assert [s.reward for s in with_alternatives(disliked, answer, **common)] == [-1, 0, 1, 0]
    # None better: the group as with thumbs.
    assert [s.reward for s in with_alternatives(disliked, answer, **common)] == [-1, 0, 0, 0]
