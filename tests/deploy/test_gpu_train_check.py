"""bench/gpu_train_check.py in its --cpu --tiny mode: the whole GPU-box path (random model with
the base model's tokenizer, the real update, the gate in memory, the micro-batch search, the
one-process launched update, several people in one step) runs here without Django, so the
script cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.launching import clean_env
from tests.helpers import ROOT

SCRIPT = ROOT / "bench" / "gpu_train_check.py"
# Run the script with django and webapp made unimportable: the GPU box has neither.
NO_DJANGO = (
    "import runpy, sys; sys.modules['django'] = None; sys.modules['webapp'] = None; "
    f"sys.argv = [{str(SCRIPT)!r}] + sys.argv[1:]; "
    f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def test_cpu_tiny_run_covers_every_leg_and_writes_its_figures(prepared_model, tmp_path):
    out = tmp_path / "figures.json"
    args = ["--cpu", "--tiny", "--tokenizer", str(prepared_model), "--out", str(out)]
    result = subprocess.run(
        [sys.executable, "-c", NO_DJANGO, *args],
        cwd=tmp_path,  # not the repository: the script finds trainer/ itself
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["failures"] == [] and figures["django_imported"] is False
    assert figures["model"]["vocab"] == 49152  # SmolLM2's tokenizer, not a made-up one
    assert figures["update"]["seconds"] > 0 and figures["update"]["tokens_per_second"] > 0
    assert len(figures["update"]["steps"]) == 2
    assert figures["gate"]["probe"]["probe_kl"] > 0
    assert figures["gate"]["base_probe"]["probe_kl"] == 0
    assert figures["largest_micro_batch"]["largest_tokens"] >= 96
    assert figures["launched"]["ok"] and figures["launched"]["launcher"] == "torchrun"
    assert figures["estimate"]["need_gib"] > 0
    several = figures["multi_person"]
    assert several["ok"] and several["people"] == 8 and several["samples"] == 64
    assert several["speedup"] > 0 and several["max_abs_adapter_difference"] < 1e-2
    for line in (
        "update:",
        "gate:",
        "largest micro-batch",
        "launched (torchrun): ok",
        "several people in one step:",
    ):
        assert line in result.stdout


@pytest.mark.skipif(_cuda_available(), reason="this host has a GPU: the check would run")
def test_without_a_gpu_it_exits_2_and_says_what_to_do(prepared_model, tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--tokenizer", str(prepared_model)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "no CUDA GPU" in result.stderr and "--cpu --tiny" in result.stderr


def test_a_folder_without_a_tokenizer_exits_2(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu", "--tiny", "--tokenizer", str(tmp_path)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "no tokenizer" in result.stderr
