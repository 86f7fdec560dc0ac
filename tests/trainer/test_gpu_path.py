"""The GPU path's settings, checked on the CPU: device choice, precision, checkpointing,
token-sized micro-batches, the serving rank limit, and the gate on the in-memory model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from tests.trainer.probing_helpers import probe_metrics
from trainer.batch import Sample, micro_batches
from trainer.config import UpdateConfig
from trainer.pipeline import train_and_probe
from trainer.policy import (
    TrainDeviceError,
    load_policy,
    pick_device,
    resolve_base_dtype,
    trainable_parameters,
    uses_gradient_checkpointing,
)
from trainer.probes import PROBE_PROMPTS, PROBE_TEXT
from trainer.update import run_update

NO_GPU = not torch.cuda.is_available()


def _samples() -> list[Sample]:
    return [
        Sample(
            list(range(10, 10 + 4 * (i + 1))),
            [40 + i, 50 + i, 60 + i],
            [-5.0] * 3,
            reward=1.0 if i % 2 else -1.0,
        )
        for i in range(6)
    ]


@pytest.mark.skipif(not NO_GPU, reason="needs a machine without a GPU")
def test_cuda_asked_for_and_missing_is_an_error_not_a_cpu_fallback(monkeypatch) -> None:
    monkeypatch.setenv("PARLEY_TRAIN_DEVICE", "cuda")
    with pytest.raises(TrainDeviceError, match="driver"):
        pick_device()


@pytest.mark.parametrize(("setting", "expected"), [("cpu", "cpu"), ("auto", None), ("", None)])
def test_cpu_and_auto_settings(monkeypatch, setting: str, expected: str | None) -> None:
    monkeypatch.setenv("PARLEY_TRAIN_DEVICE", setting)
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device().type == (expected or auto)


def test_an_unknown_device_setting_is_refused(monkeypatch) -> None:
    monkeypatch.setenv("PARLEY_TRAIN_DEVICE", "tpu")
    with pytest.raises(TrainDeviceError, match="auto, cpu or cuda"):
        pick_device()


def test_an_explicit_device_wins_over_the_setting(monkeypatch) -> None:
    monkeypatch.setenv("PARLEY_TRAIN_DEVICE", "cuda")
    assert pick_device("cpu").type == "cpu"


def test_auto_precision_and_checkpointing_are_gpu_only() -> None:
    config = UpdateConfig()
    cpu = torch.device("cpu")
    assert resolve_base_dtype(config, cpu) == torch.float32
    assert not uses_gradient_checkpointing(config, cpu)
    assert uses_gradient_checkpointing(config, torch.device("cuda"))
    assert not uses_gradient_checkpointing(
        UpdateConfig(gradient_checkpointing=False), torch.device("cuda")
    )


def test_bf16_base_trains_an_fp32_adapter(tiny_model_dir: Path) -> None:
    model = load_policy(tiny_model_dir, UpdateConfig(base_dtype="bfloat16"), device="cpu")
    trainable = trainable_parameters(model)
    frozen = [p for p in model.parameters() if not p.requires_grad]
    assert trainable and all(p.dtype == torch.float32 for p in trainable)
    assert frozen and all(p.dtype == torch.bfloat16 for p in frozen)


def test_bf16_base_update_runs_and_moves_the_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    *steps, summary = run_update(
        UpdateConfig(base_dtype="bfloat16", lr=1e-2, algorithm="rl"),
        _samples(),
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "bf16",
        device="cpu",
    )
    assert all(torch.isfinite(torch.tensor(s["loss"])) for s in steps)
    assert steps[-1]["grad_norm"] > 0 and summary["done"]


def test_gradient_checkpointing_gives_the_same_update(tiny_model_dir: Path, tmp_path: Path) -> None:
    results = {}
    for checkpointing in (False, True):
        config = UpdateConfig(lr=1e-2, algorithm="rl", gradient_checkpointing=checkpointing)
        model = load_policy(tiny_model_dir, config, device="cpu")
        assert model.get_base_model().is_gradient_checkpointing == checkpointing
        *steps, _ = run_update(
            config,
            _samples(),
            base_model_dir=tiny_model_dir,
            init_adapter_dir=None,
            out_adapter_dir=tmp_path / str(checkpointing),
            model=model,
        )
        results[checkpointing] = [s["loss"] for s in steps]
    assert results[True] == pytest.approx(results[False], rel=1e-5, abs=1e-7)


def test_micro_batches_are_sized_by_padded_tokens() -> None:
    rows = list(range(6))
    lengths = [10, 10, 10, 10, 40, 200]
    batches = list(micro_batches(rows, lengths, max_tokens=80, max_rows=16))
    assert batches == [[0, 1, 2, 3], [4], [5]]  # 200 > 80: a long row goes alone
    for batch in batches[:-1]:
        assert len(batch) * max(lengths[i] for i in batch) <= 80
    assert list(micro_batches(rows, lengths, max_tokens=10_000, max_rows=2)) == [
        [0, 1],
        [2, 3],
        [4, 5],
    ]
    assert list(micro_batches([], [], max_tokens=1, max_rows=1)) == []


def test_token_budget_sets_the_number_of_micro_batches(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples()  # sequences of 7..27 tokens
    counts = {}
    for budget in (1, 10_000):
        *_, summary = run_update(
            UpdateConfig(lr=1e-2, algorithm="rl", micro_batch_tokens=budget, steps_per_batch=1),
            samples,
            base_model_dir=tiny_model_dir,
            init_adapter_dir=None,
            out_adapter_dir=tmp_path / str(budget),
        )
        counts[budget] = summary["micro_batches"]
    assert counts == {1: len(samples), 10_000: 1}


def test_a_rank_serving_cannot_load_is_refused(tiny_model_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("VLLM_MAX_LORA_RANK", "8")
    with pytest.raises(ValueError, match="VLLM_MAX_LORA_RANK=8"):
        load_policy(tiny_model_dir, UpdateConfig(lora_rank=16))
    assert load_policy(tiny_model_dir, UpdateConfig(lora_rank=8)) is not None


def test_train_and_probe_loads_the_model_once_and_gates_it_in_memory(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    loads: list[str] = []
    original = transformers.AutoModelForCausalLM.from_pretrained

    def counting(*args, **kwargs):
        loads.append(str(args[0]))
        return original(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", counting)
    prompts = PROBE_PROMPTS[:2]
    *steps, summary = train_and_probe(
        UpdateConfig(lr=5e-2, algorithm="rl"),
        _samples(),
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "adapter",
        probe_prompts=prompts,
        max_new_tokens=8,
    )
    assert loads == [str(tiny_model_dir)]  # one load: training and both probes
    assert len(steps) == 2 and summary["done"] and summary["gate_seconds"] >= 0
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", original)
    # The in-memory figures are the ones a fresh load of the saved adapter measures.
    on_disk = probe_metrics(
        tiny_model_dir, summary["adapter_dir"], prompts, PROBE_TEXT, max_new_tokens=8
    )
    base_on_disk = probe_metrics(tiny_model_dir, None, prompts, PROBE_TEXT, max_new_tokens=8)
    assert summary["probe"]["probe_kl"] == pytest.approx(on_disk["probe_kl"], rel=1e-4)
    assert summary["probe"]["probe_ppl"] == pytest.approx(on_disk["probe_ppl"], rel=1e-4)
    assert summary["base_probe"]["probe_ppl"] == pytest.approx(base_on_disk["probe_ppl"], rel=1e-4)
    assert summary["probe"]["probe_kl"] > 0 and summary["base_probe"]["probe_kl"] == 0
