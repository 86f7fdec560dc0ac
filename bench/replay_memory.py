"""The replay's ``memory`` feedback: the preference said once, as a memory, and distilled.

The simulated user states the preference once as a memory (its ``comment``) and from then on
only asks new questions. Every answer is served with the memory in its prompt, in the form
Parley serves memories by default (``trainer.memory_prompt``, appended to the user's message),
and becomes a context-distillation sample as ``webapp.learning.distillation`` makes it
(``trainer.batch.trainer_sample(..., memory=...)``): the served prompt is the teacher's, the
turn without the memory the student's. Nothing is judged: the teacher is the signal.

Each version answers the held-out prompts twice: as served, memory in the prompt (``scores``
per split, what the person gets, and ``score``) and without it (``scores_without_memory``,
``score_without_memory``): how much of the memory the adapter holds on its own. ``score`` is
the share of the ``held_out`` split (or the first split evaluated) meeting the preference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from bench.answering import evaluate_splits
from bench.preferences import Preference
from bench.simulated_user import Answer

MEMORY_FEEDBACK = "memory"
MEMORY_FORM = "appended"
"""Parley's default served form (``PARLEY_MEMORY_FORM``)."""
WITHOUT_MEMORY = ("scores", "flawed", "broken_examples", "missed_examples")
"""The evaluation's figures recorded a second time, without the memory (``*_without_memory``)."""


def memories_of(feedback: str, preference: Preference) -> list[str]:
    """The memories a user of this feedback kind has stated: the preference's comment under
    ``memory``, none under the other kinds.

    >>> sure = Preference("sure", "Start with 'Sure!'", {"starts_with": "Sure!"})
    >>> memories_of("memory", sure), memories_of("comments", sure)
    (["Start with 'Sure!'"], [])
    """
    return [preference.comment] if feedback == MEMORY_FEEDBACK else []


def memory_samples(answers: Sequence[Answer], memories: Sequence[str], tokenizer: Any) -> list[Any]:
    """Every answer served with ``memories`` as a context-distillation ``Sample``: the served
    prompt (the answer's ``prompt_token_ids``) the teacher's, the user's text alone the
    student's, the memories as served its hint."""
    from trainer.batch import trainer_sample
    from trainer.memory_prompt import memory_block

    block = memory_block(memories)
    return [
        trainer_sample(
            tokenizer,
            prompt_messages=[{"role": "user", "content": answer.prompt}],
            prompt_token_ids=answer.prompt_token_ids,
            response_token_ids=answer.response_token_ids,
            response_logprobs=answer.logprobs,
            reward=None,
            hint=None,
            correction="",
            memory=block,
        )
        for answer in answers
    ]


def headline_split(splits: Sequence[str]) -> str:
    """The split ``score`` reads: ``held_out`` when evaluated, else the first.

    >>> headline_split(["held_out_other", "held_out"]), headline_split(["held_out_other"])
    ('held_out', 'held_out_other')
    """
    return "held_out" if "held_out" in splits else splits[0]


def served_evaluation(
    model: Any,
    tokenizer: Any,
    splits: dict[str, list[str]],
    preferences: Sequence[Preference],
    *,
    max_new_tokens: int,
    memories: Sequence[str] = (),
    scored: str = "",
) -> dict[str, Any]:
    """One version's evaluation figures (``bench.answering.Evaluation`` as a dict). With
    ``memories``: the answers as served with them, then the same figures without them
    (``*_without_memory``), and ``score`` / ``score_without_memory`` for the preference named
    ``scored`` (the first one when not named)."""
    served = evaluate_splits(
        model,
        tokenizer,
        splits,
        preferences,
        max_new_tokens=max_new_tokens,
        memories=memories,
        form=MEMORY_FORM,
    )
    figures = asdict(served)
    if not memories:
        return figures
    bare = asdict(
        evaluate_splits(model, tokenizer, splits, preferences, max_new_tokens=max_new_tokens)
    )
    figures |= {f"{key}_without_memory": bare[key] for key in WITHOUT_MEMORY}
    name, split = scored or preferences[0].name, headline_split(list(splits))
    figures["score"] = figures["scores"][name][split]
    figures["score_without_memory"] = bare["scores"][name][split]
    return figures
