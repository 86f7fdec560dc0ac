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


@pytest.mark.parametrize(
    ("setting", "cuda", "installed", "own_model", "engine"),
    [
        ("auto", False, True, False, "llamacpp"),  # a CPU host: the faster engine
        ("auto", True, True, False, "vllm"),  # a GPU host keeps vLLM
        ("auto", False, False, False, "vllm"),  # llama.cpp not installed (docker's images)
        ("auto", False, True, True, "vllm"),  # another model and no GGUF of it
        ("vllm", False, True, False, "vllm"),
        ("llamacpp", True, True, False, "llamacpp"),
    ],
)
def test_the_engine_setting_resolves_per_host(
    setting: str, cuda: bool, installed: bool, own_model: bool, engine: str
) -> None:
    from webapp.infra.serving import serving_engine

    assert serving_engine(setting, cuda=cuda, llamacpp=installed, own_model=own_model) == engine


@pytest.mark.django_db
def test_the_llamacpp_command_serves_the_gguf_with_the_models_tokenizer(settings) -> None:
    from webapp.infra.serving import llamacpp_command

    settings.VLLM_API_KEY = "secret-key"
    args, env = llamacpp_command()
    assert args[1:3] == ["-m", "webapp.infra.llamacpp_server"]
    assert _flag(args, "--gguf").endswith(".gguf")
    assert _flag(args, "--tokenizer") == str(settings.BASE_MODEL_DIR)
    assert _flag(args, "--port") == str(settings.VLLM_PORT)
    assert _flag(args, "--max-model-len") == str(settings.VLLM_MAX_MODEL_LEN)
    assert _flag(args, "--max-cpu-loras") == str(settings.MAX_CPU_LORAS)
    assert _flag(args, "--threads") == str(settings.SERVE_THREADS)
    assert "secret-key" not in " ".join(args)  # the key goes in the environment, as vLLM's
    assert env["VLLM_API_KEY"] == "secret-key"
