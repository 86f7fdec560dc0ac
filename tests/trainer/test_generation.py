"""trainer.generation: a batch of greedy answers equals the answers one prompt at a time."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from trainer.generation import eos_token_ids, greedy_batch

PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17]]  # of different lengths


def _alone(model: torch.nn.Module, prompt: list[int], stops: set[int], n: int) -> list[int]:
    [(ids, _)] = greedy_batch(model, [prompt], max_new_tokens=n, pad_id=0, stop_ids=stops)
    return ids


def test_left_padded_rows_that_end_early_equal_their_answers_alone(tiny_model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    assert eos_token_ids(model) == {2} and model.config.pad_token_id == 0  # pad ≠ eos
    free = greedy_batch(model, PROMPTS, max_new_tokens=6, pad_id=0, stop_ids=set())
    assert [(len(ids), ended) for ids, ended in free] == [(6, False)] * 3
    # Make the second prompt's 3rd token a stop: that row ends early and is padded after it.
    stop = free[1][0][2]
    stops = {stop}
    batch = greedy_batch(model, PROMPTS, max_new_tokens=6, pad_id=0, stop_ids=stops)
    ended_early = batch[1]
    assert ended_early[1] and ended_early[0][-1] == stop and len(ended_early[0]) <= 3
    for prompt, (ids, ended) in zip(PROMPTS, batch, strict=True):
        assert ids == _alone(model, prompt, stops, 6)
        assert ended == (stop in ids) and (ended or len(ids) == 6)


def test_no_prompts_no_answers(tiny_model_dir: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    assert greedy_batch(model, [], max_new_tokens=4, pad_id=0, stop_ids={2}) == []
