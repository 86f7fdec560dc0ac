"""Several people's updates in one forward and backward pass equal each person's own update.

On the tiny random Llama, in fp32: three people with different samples (rewards, a GRPO group,
hints, a correction, different lengths), configs (learning rate, KL, clipping, steps) and
initial adapters (a new one, a continued one with its AdamW state) are trained by
``run_updates`` and, one by one, by ``run_update``; adapters and optimizer states must agree
to ATOL. The only differences are float rounding: rows scored in other batches, gradients
summed in another order.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.trainer.test_update_smoke import _samples
from trainer.config import UpdateConfig
from trainer.multi_person import PersonJob, run_updates
from trainer.optimizer_state import OPTIMIZER_STATE_FILE
from trainer.update import run_update

ATOL = 1e-5


def _weights(adapter_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(adapter_dir / "adapter_model.safetensors"))


def _optimizer(adapter_dir: Path) -> dict:
    return torch.load(adapter_dir / OPTIMIZER_STATE_FILE, weights_only=True)


def _jobs(tiny_model_dir: Path, tmp_path: Path, out: str) -> list[PersonJob]:
    samples = _samples(tiny_model_dir)
    # the continued person's live adapter, with its optimizer.pt, from an update of its own
    live = tmp_path / "live"
    if not live.exists():
        list(
            run_update(
                UpdateConfig(lr=1e-2, seed=5),
                samples[:4],
                base_model_dir=tiny_model_dir,
                init_adapter_dir=None,
                out_adapter_dir=live,
            )
        )
    flipped = [
        dataclasses.replace(s, reward=-s.reward) if s.reward is not None else s for s in samples[2:]
    ]
    return [
        PersonJob(UpdateConfig(lr=1e-2), samples[:5], None, tmp_path / out / "new"),
        PersonJob(
            UpdateConfig(lr=3e-3, kl_coef=0.1, max_grad_norm=0.05, steps_per_batch=3),
            flipped,
            live,
            tmp_path / out / "continued",
        ),
        PersonJob(
            UpdateConfig(algorithm="rl", lr=1e-2, seed=2, anchor_coef=0.0),
            [samples[0], samples[1], samples[7], samples[4]],
            None,
            tmp_path / out / "rl",
        ),
    ]


def _sequential(jobs: list[PersonJob], tiny_model_dir: Path) -> list[list[dict]]:
    return [
        list(
            run_update(
                job.config,
                job.samples,
                base_model_dir=tiny_model_dir,
                init_adapter_dir=job.init_adapter_dir,
                out_adapter_dir=Path(job.out_adapter_dir).with_name(
                    Path(job.out_adapter_dir).name + "-alone"
                ),
            )
        )
        for job in jobs
    ]


@pytest.mark.parametrize("micro_batch_tokens", [None, 96], ids=["one-pass", "several-passes"])
def test_stacked_update_equals_each_persons_own_update(
    micro_batch_tokens: int | None, tiny_model_dir: Path, tmp_path: Path
) -> None:
    jobs = _jobs(tiny_model_dir, tmp_path, "stacked")
    alone = _sequential(jobs, tiny_model_dir)
    together = list(
        run_updates(jobs, base_model_dir=tiny_model_dir, micro_batch_tokens=micro_batch_tokens)
    )
    for k, job in enumerate(jobs):
        out = Path(job.out_adapter_dir)
        solo = out.with_name(out.name + "-alone")
        mine = [metrics for index, metrics in together if index == k]
        steps, summary = mine[:-1], mine[-1]
        assert len(steps) == job.config.steps_per_batch == len(alone[k]) - 1
        for got, want in zip(steps, alone[k][:-1], strict=False):
            for key in ("loss", "pg_loss", "sft_loss", "clip_fraction", "grad_norm"):
                assert got[key] == pytest.approx(want[key], abs=ATOL), (k, key)
        assert summary["done"] and summary["optimizer_state"] == alone[k][-1]["optimizer_state"]
        assert summary["optimizer_steps"] == alone[k][-1]["optimizer_steps"]
        assert summary["refined_samples"] == alone[k][-1]["refined_samples"]
        stacked_w, solo_w = _weights(out), _weights(solo)
        assert stacked_w.keys() == solo_w.keys()
        for name in solo_w:
            torch.testing.assert_close(stacked_w[name], solo_w[name], atol=ATOL, rtol=0)
        stacked_o, solo_o = _optimizer(out), _optimizer(solo)
        assert stacked_o["param_groups"] == solo_o["param_groups"]
        for index, state in solo_o["state"].items():
            for key, value in state.items():
                torch.testing.assert_close(stacked_o["state"][index][key], value, atol=ATOL, rtol=0)
        config, solo_config = (
            json.loads((d / "adapter_config.json").read_text()) for d in (out, solo)
        )
        assert set(config.pop("target_modules")) == set(solo_config.pop("target_modules"))
        assert config == solo_config
    # hints were refined in one greedy batch for two people (the rl person ignores hints)
    assert [m["refined_samples"] for i, m in together if m.get("done")] == [2, 2, 0]
    # the continued person's AdamW moments carried over, and clipping held their step
    continued = [metrics for index, metrics in together if index == 1]
    assert continued[-1]["optimizer_state"] == "continued"
    assert continued[0]["grad_norm"] > 0.05


def test_a_persons_adapter_ignores_the_other_peoples_samples(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples(tiny_model_dir)
    config = UpdateConfig(lr=1e-2)

    def train(other: list, out: str) -> tuple[dict, dict]:
        jobs = [
            PersonJob(config, samples[:4], None, tmp_path / out / "me"),
            PersonJob(config, other, None, tmp_path / out / "other"),
        ]
        list(run_updates(jobs, base_model_dir=tiny_model_dir))
        return _weights(tmp_path / out / "me"), _weights(tmp_path / out / "other")

    me, other = train(samples[4:], "a")
    longer = [dataclasses.replace(s, reward=1.0, hint=None) for s in samples[1:]]
    me_again, other_again = train(longer, "b")
    for name in me:
        torch.testing.assert_close(me_again[name], me[name], atol=1e-6, rtol=0)
    assert any(not torch.allclose(other[n], other_again[n], atol=1e-4) for n in other)


def test_lora_dropout_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    job = PersonJob(UpdateConfig(lora_dropout=0.1), _samples(tiny_model_dir), None, tmp_path)
    with pytest.raises(ValueError, match="dropout"):
        list(run_updates([job], base_model_dir=tiny_model_dir))
