"""Hint refinement: a comment becomes an answer to learn from (learning from language feedback).

A 👎 with a comment ("start with 'Sure!'") gives on-policy distillation a teacher (the model
with the hint in its prompt), but OPD only scores the tokens the student sampled: an answer
that did not open with "Sure!" gets its own opening pushed down, and nothing pushes "Sure!"
up. Measured in the replay (README, "Learning benchmarks"), comments alone left "start with
Sure!" at 0.00 after 12 versions while the perplexity drifted past the gate.

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

import torch

from trainer.batch import Sample
from trainer.config import UpdateConfig
from trainer.policy import adapter_disabled


def eos_token_ids(model: torch.nn.Module) -> set[int]:
    """The ids that end an answer, as the model's generation config (else config) names them."""
    generation = getattr(model, "generation_config", None)
    value = getattr(generation, "eos_token_id", None)
    if value is None:
        value = getattr(model.config, "eos_token_id", None)
    if value is None:
        return set()
    return {int(value)} if isinstance(value, int) else {int(v) for v in value}


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
    width = max(len(p) for p in prompts)
    device = next(model.parameters()).device
    input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts], device=device)
    attention = torch.tensor(
        [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device
    )
    was_training = model.training
    model.eval()
    teacher_off = adapter_disabled(model) if config.teacher == "base" else contextlib.nullcontext()
    try:
        with teacher_off:
            out = model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=config.refine_max_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=pad_id,
                eos_token_id=sorted(eos_ids) or None,
            )
    finally:
        model.train(was_training)
    refined = list(samples)
    count = 0
    for row, index in enumerate(chosen):
        ids = out[row, width:].tolist()
        end = next((k for k, token in enumerate(ids) if token in eos_ids), None)
        if end is not None:
            ids = ids[: end + 1]  # keep the stop token: the answer ends there
        if not [t for t in ids if t not in eos_ids and t != pad_id]:
            continue
        refined[index] = dataclasses.replace(samples[index], correction_token_ids=ids)
        count += 1
    return refined, count
