"""The answers the webapp samples beside a bare 👎 (``webapp.learning.alternatives``), in the
replay: the policy that wrote the disliked answer writes ``n`` more to its prompt, each a
reward-0 sample in the 👎's group, so the update compares them (a GRPO group). With a
``preference`` (the ``pairs`` feedback) the user compares them too, as the chat asks below a
👎'd answer (``webapp.learning.comparisons``): the one they choose
(``bench.simulated_user.choose``) is a +1 sample in the group."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.answering import generate
from bench.preferences import Preference
from bench.simulated_user import Answer, choose
from trainer.batch import Sample, trainer_sample
from trainer.claim import is_bare_dislike


def with_alternatives(
    sample: Sample,
    answer: Answer,
    *,
    model: Any,
    tokenizer: Any,
    n: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    preference: Preference | None = None,
) -> list[Sample]:
    """``sample``, and when it is a bare 👎, it in a group with ``n`` answers sampled beside it;
    with ``preference``, the one the user chooses among them rewarded +1."""
    bare = is_bare_dislike(
        reward=sample.reward, hint=sample.hint, correction=sample.correction_token_ids
    )
    if n <= 0 or not bare:
        return [sample]
    group = f"prompt:{seed}:{answer.prompt}"
    others = generate(
        model,
        tokenizer,
        [answer.prompt] * n,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
    )
    others = [other for other in others if other.response_token_ids]
    chosen = choose(preference, others) if preference is not None else None
    unseen = [
        trainer_sample(
            tokenizer,
            prompt_messages=[{"role": "user", "content": answer.prompt}],
            prompt_token_ids=other.prompt_token_ids,
            response_token_ids=other.response_token_ids,
            response_logprobs=other.logprobs,
            reward=1.0 if index == chosen else 0.0,
            hint=None,
            correction="",
            group_id=group,
        )
        for index, other in enumerate(others)
    ]
    return [dataclasses.replace(sample, group_id=group), *unseen]
