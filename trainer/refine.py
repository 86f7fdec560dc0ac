"""Hint refinement: a comment becomes an answer to learn from (learning from language feedback).

A 👎 with a comment ("start with 'Sure!'") gives on-policy distillation a teacher (the model
with the hint in its prompt), but OPD only scores the tokens the student sampled: an answer
that did not open with "Sure!" gets its own opening pushed down, and nothing pushes "Sure!"
up: with OPD alone a comment moves the model away from plain English before it moves it toward
what the comment asks.

So before an update, each hinted sample without a user's correction gets a *refinement*: the
teacher's own greedy answer to the hinted prompt, which is then trained like a correction (the
supervised term, weight ``sft_coef``) under the prompt the user actually sent. This is the
refine-then-imitate step of learning from natural-language feedback (Scheurer et al., 2023,
"Training Language Models with Language Feedback at Scale") and of context distillation: the
model learns to answer, without the hint, the way it answers with it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch

from trainer.batch import Sample
from trainer.config import UpdateConfig
from trainer.generation import greedy_batch
from trainer.policy import adapter_disabled


@dataclass(frozen=True)
class Refinement:
    """An update's samples after hint refinement, how many of them it refined, in how long."""

    samples: list[Sample]
    refined: int = 0
    seconds: float = 0.0


def needs_refinement(sample: Sample) -> bool:
    """A hinted sample whose user gave no correction of their own."""
    return bool(sample.hint and sample.teacher_prompt_token_ids and not sample.correction_token_ids)


@torch.no_grad()
def refine_with_hints(
    model: torch.nn.Module,
    samples: list[Sample],
    config: UpdateConfig,
    *,
    eos_ids: set[int],
    pad_id: int,
) -> tuple[list[Sample], int]:
    """The samples, each hinted one without a correction given the teacher's greedy answer to
    its hinted prompt as ``correction_token_ids``; and how many were refined.

    The teacher is the one OPD uses (``config.teacher``: the base, or the policy at the start
    of the update). An answer is at most ``config.refine_max_tokens`` long; one that comes out
    empty is left out (the sample stays as it was).
    """
    chosen = [i for i, s in enumerate(samples) if needs_refinement(s)]
    if not chosen or config.refine_max_tokens <= 0:
        return samples, 0
    prompts = [list(samples[i].teacher_prompt_token_ids or []) for i in chosen]
    was_training = model.training
    model.eval()
    teacher_off = adapter_disabled(model) if config.teacher == "base" else contextlib.nullcontext()
    try:
        with teacher_off:
            answers = greedy_batch(
                model,
                prompts,
                max_new_tokens=config.refine_max_tokens,
                pad_id=pad_id,
                stop_ids=eos_ids,
            )
    finally:
        model.train(was_training)
    refined = list(samples)
    count = 0
    for index, (ids, _) in zip(chosen, answers, strict=True):  # the stop token is kept
        if not [t for t in ids if t not in eos_ids and t != pad_id]:
            continue
        refined[index] = dataclasses.replace(samples[index], correction_token_ids=ids)
        count += 1
    return refined, count
