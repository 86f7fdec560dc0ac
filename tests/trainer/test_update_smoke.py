"""Two update steps on a tiny random Llama: every algorithm trains, saves and reloads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

from trainer import losses
from trainer.algorithms import ALGORITHMS, Algorithm
from trainer.batch import Sample, chat_prompt_ids, hinted_prompt_ids
from trainer.config import UpdateConfig
from trainer.policy import load_policy, token_logprobs
from trainer.update import run_update

STEP_KEYS = {
    "loss",
    "pg_loss",
    "sft_loss",
    "kl",
    "anchor_kl",
    "mean_advantage",
    "clip_fraction",
    "tokens",
    "seconds",
    "peak_rss_mb",
    "peak_gpu_mb",
    "logprob_gap_mean",
    "logprob_gap_max",
    "grad_norm",
}


def _samples(model_dir: Path) -> list[Sample]:
    """Eight samples covering RL, OPD, both, a GRPO group and a correction."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    generator = torch.Generator().manual_seed(0)
    samples = []
    specs = [
        ("what is two plus two?", " four.", 1.0, None, None, None),
        ("name a colour", " blue, I think", -1.0, None, None, None),
        ("say hello", " hi there", None, "start your answer with Sure!", None, None),
        ("say goodbye", " bye", 1.0, "be polite", None, None),
        ("pick a number", " seven", 1.0, None, None, "g1"),
        ("pick a number", " eleven!", -1.0, None, None, "g1"),
        ("pick a number", " two", 1.0, None, None, "g1"),
        ("greet me", " yo", -1.0, None, "Sure! Hello.", None),
    ]
    for question, answer, reward, hint, correction, group in specs:
        messages = [{"role": "user", "content": question}]
        response = tokenizer(answer, add_special_tokens=False)["input_ids"]
        sampler = (-torch.rand(len(response), generator=generator) * 4 - 2).tolist()
        samples.append(
            Sample(
                prompt_token_ids=chat_prompt_ids(tokenizer, messages),
                response_token_ids=response,
                sampler_logprobs=sampler,
                reward=reward,
                hint=hint,
                teacher_prompt_token_ids=hinted_prompt_ids(tokenizer, messages, hint)
                if hint
                else None,
                correction_token_ids=tokenizer(correction, add_special_tokens=False)["input_ids"]
                if correction
                else None,
                group_id=group,
            )
        )
    return samples


def _lora_weights(adapter_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(adapter_dir / "adapter_model.safetensors"))


def _run(
    config: UpdateConfig,
    samples: list[Sample],
    model_dir: Path,
    out: Path,
    init: Path | None = None,
) -> list[dict]:
    return list(
        run_update(
            config, samples, base_model_dir=model_dir, init_adapter_dir=init, out_adapter_dir=out
        )
    )


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_two_steps_train_the_adapter_and_save_it(
    algorithm: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    config = UpdateConfig(algorithm=algorithm, lr=1e-2, micro_batch_size=3, kl_coef=0.1)
    results = _run(config, _samples(tiny_model_dir), tiny_model_dir, tmp_path / "adapter")
    steps, summary = results[:-1], results[-1]
    assert len(steps) == 2
    for step in steps:
        assert STEP_KEYS <= step.keys()
        assert set(ALGORITHMS[algorithm].step_columns) <= step.keys()  # the admin's columns
        assert math.isfinite(step["loss"]) and math.isfinite(step["pg_loss"])
        assert step["tokens"] > 0 and step["peak_rss_mb"] > 0
        assert step["logprob_gap_max"] >= step["logprob_gap_mean"] > 0
    assert steps[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # a new adapter starts at the base
    assert steps[1]["kl"] > 0.0
    assert steps[0]["sft_loss"] > 0.0  # the correction trains under every algorithm
    assert summary["done"] is True
    assert json.dumps(results)  # the caller stores metrics as JSON
    adapter = Path(summary["adapter_dir"])
    config_json = json.loads((adapter / "adapter_config.json").read_text())
    assert set(config_json["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    weights = _lora_weights(adapter)
    lora_b = [w for name, w in weights.items() if "lora_B" in name]
    assert lora_b and any(w.abs().sum() > 0 for w in lora_b)  # B starts at zero: it moved


def test_continuing_an_adapter_changes_its_weights_and_it_reloads(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples(tiny_model_dir)
    config = UpdateConfig(lr=1e-2)
    first = _run(config, samples, tiny_model_dir, tmp_path / "v1")[-1]["adapter_dir"]
    _run(config, samples, tiny_model_dir, tmp_path / "v2", init=Path(first))
    before, after = _lora_weights(Path(first)), _lora_weights(tmp_path / "v2")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    reloaded = load_policy(tiny_model_dir, config, init_adapter_dir=tmp_path / "v2")
    ids = torch.tensor([samples[0].prompt_token_ids + samples[0].response_token_ids])
    mask = torch.zeros_like(ids, dtype=torch.float32)
    mask[0, len(samples[0].prompt_token_ids) :] = 1
    assert torch.isfinite(token_logprobs(reloaded, ids, torch.ones_like(ids), mask)).all()


def test_same_seed_gives_the_same_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    samples = _samples(tiny_model_dir)
    config = UpdateConfig(lr=1e-2, seed=3)
    _run(config, samples, tiny_model_dir, tmp_path / "a")
    _run(config, samples, tiny_model_dir, tmp_path / "b")
    a, b = _lora_weights(tmp_path / "a"), _lora_weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_rl_only_ignores_hints_and_opd_only_ignores_rewards(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = [s for s in _samples(tiny_model_dir) if s.correction_token_ids is None]
    rl = _run(UpdateConfig(algorithm="rl"), samples, tiny_model_dir, tmp_path / "rl")[-1]
    opd = _run(UpdateConfig(algorithm="opd"), samples, tiny_model_dir, tmp_path / "opd")[-1]
    assert rl["pg_samples"] == sum(s.reward is not None for s in samples)
    assert opd["pg_samples"] == sum(s.hint is not None for s in samples)
    assert rl["sft_samples"] == rl["refined_samples"] == 0  # RL-only: hints are not refined
    # OPD refines each hint into an answer of the teacher's, trained like a correction
    hinted = sum(s.hint is not None for s in samples)
    assert opd["sft_samples"] == opd["refined_samples"] == hinted > 0


def test_the_loss_the_registry_names_is_the_one_that_runs(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[torch.Size] = []

    def spy_loss(logp_B_T, *args, **kwargs):
        calls.append(logp_B_T.shape)
        return losses.ppo_clip_loss(logp_B_T, *args, **kwargs)

    rl = ALGORITHMS["rl"]
    spy = Algorithm("spy", True, False, rl.sample_kinds, "spy_loss", rl.step_metrics)
    monkeypatch.setitem(losses.POLICY_LOSSES, "spy_loss", spy_loss)
    monkeypatch.setitem(ALGORITHMS, "spy", spy)
    samples = [s for s in _samples(tiny_model_dir) if s.reward is not None]
    config = UpdateConfig(algorithm="spy", steps_per_batch=1, micro_batch_size=len(samples))
    results = _run(config, samples, tiny_model_dir, tmp_path / "spy")
    assert sum(shape[0] for shape in calls) == len(samples)  # one step: each row once
    assert results[-1]["done"] is True and math.isfinite(results[0]["pg_loss"])


def test_micro_batch_size_does_not_change_the_update(tiny_model_dir: Path, tmp_path: Path) -> None:
    samples = _samples(tiny_model_dir)
    _run(UpdateConfig(lr=1e-2, micro_batch_size=1), samples, tiny_model_dir, tmp_path / "one")
    _run(UpdateConfig(lr=1e-2, micro_batch_size=8), samples, tiny_model_dir, tmp_path / "all")
    one, whole = _lora_weights(tmp_path / "one"), _lora_weights(tmp_path / "all")
    assert all(torch.allclose(one[k], whole[k], atol=1e-5) for k in one)


def test_sampler_old_logprobs_also_train(tiny_model_dir: Path, tmp_path: Path) -> None:
    config = UpdateConfig(old_logp_source="sampler", lr=1e-2)
    results = _run(config, _samples(tiny_model_dir), tiny_model_dir, tmp_path / "s")
    assert all(math.isfinite(r["loss"]) for r in results[:-1])
    assert results[0]["logprob_gap_mean"] > 0


@pytest.mark.parametrize("teacher", ["base", "policy"])
def test_a_continued_adapter_can_be_its_own_teacher(
    teacher: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples(tiny_model_dir)
    first = _run(UpdateConfig(lr=1e-2), samples, tiny_model_dir, tmp_path / "v1")[-1]
    config = UpdateConfig(algorithm="opd", teacher=teacher, lr=1e-2)
    results = _run(config, samples, tiny_model_dir, tmp_path / "v2", Path(first["adapter_dir"]))
    # The OPD advantage is teacher − old; the two teachers disagree once the adapter has moved.
    assert math.isfinite(results[0]["mean_advantage"]) and results[0]["mean_advantage"] != 0.0
    assert results[-1]["done"] is True


def test_lora_dropout_still_measures_the_gap_against_a_clean_old_policy(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples(tiny_model_dir)
    clean = _run(UpdateConfig(lr=1e-2), samples, tiny_model_dir, tmp_path / "a")
    dropout = _run(UpdateConfig(lr=1e-2, lora_dropout=0.1), samples, tiny_model_dir, tmp_path / "b")
    # A new adapter is the base model whatever its dropout: the old log-probs are the same.
    assert dropout[0]["logprob_gap_mean"] == pytest.approx(clean[0]["logprob_gap_mean"], abs=1e-6)
