"""`make run`'s vLLM command honours the settings docker's does: the GPU memory share, and a
dtype resolved by the trainer's own rule (bf16 on a GPU, fp32 on the CPU)."""

from __future__ import annotations

import pytest
import torch

from trainer.config import UpdateConfig
from trainer.policy import resolve_base_dtype
from webapp.infra.serving import serving_dtype, vllm_command


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.django_db
def test_make_run_passes_the_gpu_memory_share_and_the_resolved_dtype(settings) -> None:
    settings.VLLM_GPU_MEMORY_UTILIZATION = 0.55
    settings.VLLM_DTYPE = "auto"
    args, env = vllm_command()
    assert _flag(args, "--gpu-memory-utilization") == "0.55"
    expected = "bfloat16" if torch.cuda.is_available() else "float32"
    assert _flag(args, "--dtype") == expected
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


@pytest.mark.django_db
def test_an_explicit_dtype_is_kept(settings) -> None:
    settings.VLLM_DTYPE = "float16"
    assert _flag(vllm_command()[0], "--dtype") == "float16"


@pytest.mark.parametrize("cuda", [True, False])
def test_serving_and_training_hold_the_weights_in_the_same_precision(cuda: bool) -> None:
    device = torch.device("cuda" if cuda else "cpu")
    if cuda and not torch.cuda.is_available():
        # resolve_base_dtype asks the GPU whether it has bf16; without one, state the rule.
        assert serving_dtype("auto", cuda=True) == "bfloat16"
        return
    trainer = str(resolve_base_dtype(UpdateConfig(), device)).removeprefix("torch.")
    assert serving_dtype("auto", cuda=cuda) == trainer


@pytest.mark.django_db
def test_both_vllm_commands_report_log_probs_at_the_sampling_temperature() -> None:
    """The trainer scores each answer at its sampling temperature (trainer.batch.Sample), so
    vLLM must report the processed log-probs, not the raw ones (its default)."""
    from pathlib import Path

    assert _flag(vllm_command()[0], "--logprobs-mode") == "processed_logprobs"
    compose = (Path(__file__).parents[2] / "docker" / "compose.yaml").read_text()
    assert "--logprobs-mode=processed_logprobs" in compose
