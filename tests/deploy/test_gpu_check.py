"""bench/gpu_check.py: refuses clearly without a GPU, and its whole path (vLLM with LoRA, chat,
update, publish, chat on the adapter) runs end to end on the CPU with --cpu."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.launching import clean_env
from tests.helpers import ROOT

SCRIPT = ROOT / "bench" / "gpu_check.py"


def run_script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_cuda_available(), reason="this host has a GPU: the check would run")
def test_without_a_gpu_it_exits_2_and_says_what_to_do(prepared_model):
    result = run_script("--model", str(prepared_model), timeout=120)
    assert result.returncode == 2
    assert "no CUDA GPU" in result.stderr and "--cpu" in result.stderr


def test_a_missing_model_folder_exits_2(tmp_path):
    result = run_script("--cpu", "--model", str(tmp_path / "nothing"), timeout=120)
    assert result.returncode == 2
    assert "is not a model folder" in result.stderr


def test_cpu_run_chats_trains_publishes_and_chats_with_the_adapter(prepared_model, tmp_path):
    out = tmp_path / "gpu_check.json"
    result = run_script(
        *("--cpu", "--model", str(prepared_model), "--out", str(out)),
        *("--max-tokens", "16", "--samples", "2", "--start-timeout", "600"),
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["device"] == "cpu"
    assert figures["vllm_start_s"] > 0
    for chat in ("chat_base", "chat_adapter"):
        assert figures[chat]["completion_tokens"] > 0, chat
        assert 0 < figures[chat]["ttft_s"] <= figures[chat]["total_s"], chat
    update = figures["update"]
    assert update["samples"] == 2 and update["tokens_per_step"] > 0
    assert len(update["step_seconds"]) == 2
    # The sampled tokens were scored by the trainer as vLLM scored them (both fp32 here).
    assert update["logprob_gap_mean"] < 0.05
    assert figures["publish_s"] > 0
    assert "done in" in result.stdout
