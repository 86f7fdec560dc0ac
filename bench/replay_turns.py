"""One version's turns in the offline replay: the simulated user's answers to the policy turned
into the trainer's samples, as the webapp turns them.

Under the feedback kinds that react (``bench.simulated_user``) each answer is reacted to and
judged (``judged_sample``), a bare 👎 with the answers sampled beside it
(``bench.replay_alternatives``), and the judge's votes are counted against the truth. Under
``memory`` every answer is a memory sample (``bench.replay_memory``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.preferences import Preference
from bench.replay_alternatives import with_alternatives
from bench.replay_memory import memories_of, memory_samples
from bench.replay_options import ReplayOptions
from bench.simulated_user import Answer, judged_sample, react


def turn_samples(
    answers: Sequence[Answer],
    wanted: Preference,
    options: ReplayOptions,
    *,
    model: Any,
    tokenizer: Any,
    judge: dict[str, int],
    turns: int,
    number: int,
) -> tuple[list[Any], int]:
    """(the samples of one version's answers, how many answers met ``wanted``). ``turns``: the
    turns before these; ``number``: the version; ``judge``: the run's counts, added to."""
    memories = memories_of(options.feedback, wanted)
    if memories:
        met = sum(wanted.meets(a.text, a.response_token_ids) for a in answers)
        return memory_samples(answers, memories, tokenizer), met
    samples: list[Any] = []
    met = 0
    for index, answer in enumerate(answers):
        reaction = react(
            wanted,
            answer.text,
            options.feedback,
            token_ids=answer.response_token_ids,
            language=options.language,
            seed=options.seed,
            turn=turns + index,
        )
        met += reaction.truth > 0
        judge["neutral"] += reaction.neutral
        sample, verdict = judged_sample(answer, reaction, tokenizer, judge=options.judge)
        truth = 0 if reaction.neutral else reaction.truth  # a new question says nothing
        for vote in verdict.votes:
            judge["votes"] += 1
            judge["parsed"] += vote["score"] is not None
            judge["right"] += vote["score"] == truth
        if sample is None:
            continue
        judge["hints"] += sample.hint is not None
        grouped = with_alternatives(
            sample,
            answer,
            model=model,
            tokenizer=tokenizer,
            n=options.alternatives,
            max_new_tokens=options.gen_tokens,
            temperature=options.temperature,
            seed=options.seed * 100_003 + number * 1_000 + index,
            preference=wanted if options.feedback == "pairs" else None,
        )
        if options.feedback == "pairs" and len(grouped) > 1:
            judge["compared"] += 1
            judge["chosen"] += any(s.reward == 1.0 for s in grouped[1:])
        samples += grouped
    return samples, met
