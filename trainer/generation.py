"""Greedy answers from a policy in memory, many prompts in one batch.

The gate answers its probe prompts this way and the hint refinement its hinted prompts: left
padding, one decoding loop for the batch, and each answer cut after its first stop token, so it
is what the model answers to that prompt alone (a test checks it on the real model).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def eos_token_ids(model: torch.nn.Module) -> set[int]:
    """The ids that end an answer, as the model's generation config (else config) names them."""
    generation = getattr(model, "generation_config", None)
    value = getattr(generation, "eos_token_id", None)
    if value is None:
        value = getattr(model.config, "eos_token_id", None)
    if value is None:
        return set()
    return {int(value)} if isinstance(value, int) else {int(v) for v in value}


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids (B, P), attention mask (B, P)) of prompts padded on the left to one width,
    as generation needs them: every row's next token follows its last prompt token."""
    width = max(len(p) for p in prompts)
    input_B_P = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts])
    mask_B_P = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return input_B_P, mask_B_P


@torch.no_grad()
def greedy_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    pad_id: int,
    stop_ids: set[int],
) -> list[tuple[list[int], bool]]:
    """Per prompt: (the answer's ids, up to and including its first stop token; whether it
    ended with one). An answer that did not end has ``max_new_tokens`` ids."""
    if not prompts:
        return []
    device = next(model.parameters()).device
    input_B_P, mask_B_P = left_pad(prompts, pad_id)
    width = input_B_P.shape[1]
    sequence_B_T = model.generate(
        input_ids=input_B_P.to(device),
        attention_mask=mask_B_P.to(device),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        pad_token_id=pad_id,
        eos_token_id=sorted(stop_ids) or None,
        use_cache=True,  # the trainer turns the cache off for training, not for generating
    )
    answers = []
    for row in range(len(prompts)):
        ids = sequence_B_T[row, width:].tolist()
        end = next((k for k, token in enumerate(ids) if token in stop_ids), None)
        answers.append((ids[: end + 1], True) if end is not None else (ids, False))
    return answers
