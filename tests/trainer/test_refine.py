"""Hint refinement (trainer.refine): a comment's hinted prompt answered by the teacher becomes
an answer the update learns from, like a user's correction."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainer.batch import Sample
from trainer.config import UpdateConfig
from trainer.generation import eos_token_ids
from trainer.policy import load_policy
from trainer.refine import needs_refinement, refine_with_hints
from trainer.update import run_update


def _sample(**signals: object) -> Sample:
    return Sample(
        prompt_token_ids=[5, 6, 7],
        response_token_ids=[8, 9],
        sampler_logprobs=[-1.0, -1.5],
        **signals,  # type: ignore[arg-type]
    )


def test_only_hinted_samples_without_a_correction_are_refined() -> None:
    assert needs_refinement(
        _sample(reward=-1.0, hint="Start with Sure!", teacher_prompt_token_ids=[5, 6, 7, 10])
    )
    assert not needs_refinement(_sample(reward=-1.0))  # a bare 👎: nothing to refine with
    assert not needs_refinement(  # the user's own correction wins
        _sample(hint="h", teacher_prompt_token_ids=[5, 10], correction_token_ids=[11])
    )
    assert not needs_refinement(_sample(hint="", teacher_prompt_token_ids=[5, 10]))


def test_the_teachers_greedy_answer_becomes_the_correction(tiny_model_dir: Path) -> None:
    config = UpdateConfig(refine_max_tokens=6)
    model = load_policy(tiny_model_dir, config)
    hinted = _sample(reward=-1.0, hint="h", teacher_prompt_token_ids=[5, 6, 7, 12, 13])
    thumbs = _sample(reward=1.0)
    corrected = _sample(hint="h", teacher_prompt_token_ids=[5, 6, 14], correction_token_ids=[20])
    eos = eos_token_ids(model)
    out, count = refine_with_hints(
        model, [hinted, thumbs, corrected], config, eos_ids=eos, pad_id=0
    )
    assert count == 1
    assert out[1] is thumbs and out[2] is corrected
    refinement = out[0].correction_token_ids
    assert refinement and 1 <= len(refinement) <= 6
    assert all(t not in eos for t in refinement[:-1])  # it stops at the first end token
    assert dataclasses.replace(out[0], correction_token_ids=None) == hinted  # nothing else moved
    again, _ = refine_with_hints(model, [hinted], config, eos_ids=eos, pad_id=0)
    assert again[0].correction_token_ids == refinement  # greedy: the same every time


def test_refinement_can_be_turned_off(tiny_model_dir: Path) -> None:
    config = UpdateConfig(refine_max_tokens=0)
    model = load_policy(tiny_model_dir, config)
    hinted = _sample(reward=-1.0, hint="h", teacher_prompt_token_ids=[5, 6, 7, 12])
    assert refine_with_hints(model, [hinted], config, eos_ids=set(), pad_id=0) == ([hinted], 0)
    with pytest.raises(ValueError, match="refine_max_tokens"):
        UpdateConfig(refine_max_tokens=-1)


def test_an_update_trains_the_refinements_with_the_supervised_term(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    hinted = [
        _sample(reward=-1.0, hint="h", teacher_prompt_token_ids=[5, 6, 7, 12 + i]) for i in range(3)
    ]
    *_, summary = run_update(
        UpdateConfig(refine_max_tokens=4),
        hinted,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "v1",
    )
    assert summary["refined_samples"] == 3 and summary["sft_samples"] == 3
    *_, off = run_update(
        UpdateConfig(refine_max_tokens=0),
        hinted,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "v1-off",
    )
    assert off["refined_samples"] == 0 and off["sft_samples"] == 0
