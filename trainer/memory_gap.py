"""How far a policy still needs a memory in its prompt: the gap the gate measures per memory.

For a memory m and a held-out prompt x, the policy answers x with m in its prompt (greedy, the
served form of ``trainer.memory_prompt``); the gap is the mean per-token log-probability of
that answer with m minus without it. A policy that answers as if m were given without it has
a gap near 0. The base model's gap on its own answers is the reference: a memory is *learnt*
by a version whose gap is at most ``LEARNT_SHARE`` of the base's, where the base's gap is at
least ``MIN_BASE_GAP`` (a memory that does not change the base's answers to these prompts,
"I'm vegetarian" on a question about the sea, cannot be seen learnt on them).

>>> is_learnt({"gap": 0.05, "base_gap": 0.4})
True
>>> is_learnt({"gap": 0.3, "base_gap": 0.4}), is_learnt({"gap": 0.0, "base_gap": 0.001})
(False, False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trainer.batch import chat_prompt_ids, collate
from trainer.generation import eos_token_ids, greedy_batch
from trainer.memory_prompt import served_messages
from trainer.policy import adapter_disabled, token_logprobs

LEARNT_SHARE = 0.35
MIN_BASE_GAP = 0.02
GAP_PROMPTS: tuple[str, ...] = (
    "What should I do this weekend?",
    "Explain how a rainbow forms.",
    "Give me a quick idea for dinner.",
    "How far is it from Paris to Berlin?",
)
"""Held-out prompts of other kinds than people's own turns (the gate's, never trained on)."""
GAP_TOKENS = 32


def is_learnt(figures: Mapping[str, float]) -> bool:
    base = figures.get("base_gap", 0.0)
    return base >= MIN_BASE_GAP and figures.get("gap", base) <= LEARNT_SHARE * base


def _gap(
    model: torch.nn.Module,
    plain: list[list[int]],
    taught: list[list[int]],
    *,
    pad_id: int,
    stop_ids: set[int],
) -> float:
    answers = [
        ids
        for ids, _ in greedy_batch(
            model, taught, max_new_tokens=GAP_TOKENS, pad_id=pad_id, stop_ids=stop_ids
        )
    ]
    kept = [i for i, ids in enumerate(answers) if ids]
    if not kept:
        return 0.0
    device = next(model.parameters()).device
    totals = []
    for prompts in (taught, plain):
        batch = collate([prompts[i] for i in kept], [answers[i] for i in kept], pad_id=pad_id).to(
            device
        )
        logp_B_T = token_logprobs(
            model, batch.input_ids_B_T, batch.attention_mask_B_T, batch.target_mask_B_T
        )
        totals.append(float(logp_B_T.sum()))
    tokens = sum(len(answers[i]) for i in kept)
    return (totals[0] - totals[1]) / tokens


@torch.no_grad()
def memory_gaps(
    model: torch.nn.Module,
    tokenizer: Any,
    memories: Sequence[str],
    *,
    form: str = "appended",
    prompts: Sequence[str] = GAP_PROMPTS,
) -> list[dict[str, Any]]:
    """Per memory: {"memory", "gap" (the policy as it is, adapter on), "base_gap" (adapter
    off), "learnt"}."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    stop_ids = eos_token_ids(model)
    was_training = model.training
    model.eval()
    out = []
    try:
        for memory in memories:
            asked = [[{"role": "user", "content": prompt}] for prompt in prompts]
            plain = [chat_prompt_ids(tokenizer, messages) for messages in asked]
            taught = [
                chat_prompt_ids(tokenizer, served_messages(messages, [memory], form=form))
                for messages in asked
            ]
            figures = {"memory": memory}
            figures["gap"] = _gap(model, plain, taught, pad_id=pad_id, stop_ids=stop_ids)
            with adapter_disabled(model):
                figures["base_gap"] = _gap(model, plain, taught, pad_id=pad_id, stop_ids=stop_ids)
            figures["learnt"] = is_learnt(figures)
            out.append(figures)
    finally:
        model.train(was_training)
    return out
