"""docker/vllm-start.sh, run with a stand-in `vllm` that prints its arguments: the current
entrypoint (`vllm serve`), compose's flags, the live adapter loaded at start (from the file
adapter-sync writes, through the entrypoint's own writer) and VLLM_EXTRA_ARGS."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.helpers import ROOT

SCRIPT = ROOT / "docker" / "vllm-start.sh"
COMPOSE_FLAGS = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["x-vllm"]["command"]


@pytest.fixture(scope="module")
def entrypoint() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "parley_docker_entrypoint_vllm", ROOT / "docker" / "entrypoint.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start(tmp_path: Path, **env: str) -> list[str]:
    """The argv the script hands to `vllm` (one argument per line from the stand-in)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "vllm"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "ARG $a"; done\n')
    fake.chmod(0o755)
    result = subprocess.run(
        ["/bin/sh", str(SCRIPT), *COMPOSE_FLAGS],
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "PARLEY_LIVE_ADAPTER_FILE": str(tmp_path / "live-adapter"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    return [line[4:] for line in result.stdout.splitlines() if line.startswith("ARG ")]


def test_vllm_starts_through_vllm_serve_with_compose_flags(tmp_path: Path) -> None:
    argv = start(tmp_path)
    assert argv[:2] == ["serve", "/models/base"]
    assert argv[2:] == COMPOSE_FLAGS  # no adapter yet, no extra arguments
    assert "--enable-lora" in argv and "--lora-modules" not in argv


def test_a_restarted_vllm_loads_the_live_adapter_adapter_sync_recorded(
    tmp_path: Path, entrypoint: ModuleType
) -> None:
    adapter = tmp_path / "adapters" / "update-7"
    adapter.mkdir(parents=True)
    live_file = str(tmp_path / "live-adapter")
    assert entrypoint.write_live_adapter(live_file, "parley-v3", str(adapter))
    assert not entrypoint.write_live_adapter(live_file, "parley-v3", str(adapter))  # unchanged
    argv = start(tmp_path)
    assert argv[-2:] == ["--lora-modules", f"parley-v3={adapter}"]
    # Rolled back to the base model: the file goes, and a restart serves the base only.
    assert entrypoint.write_live_adapter(live_file, None, None)
    assert not os.path.exists(live_file)
    assert "--lora-modules" not in start(tmp_path)


def test_a_live_adapter_whose_folder_is_gone_is_skipped(
    tmp_path: Path, entrypoint: ModuleType
) -> None:
    entrypoint.write_live_adapter(str(tmp_path / "live-adapter"), "parley-v9", "/nowhere/v9")
    assert "--lora-modules" not in start(tmp_path)


def test_vllm_extra_args_are_split_and_appended(tmp_path: Path) -> None:
    argv = start(tmp_path, VLLM_EXTRA_ARGS="--max-num-seqs 64  --enable-prefix-caching")
    assert argv[-3:] == ["--max-num-seqs", "64", "--enable-prefix-caching"]


def test_the_train_role_refuses_to_start_without_the_gpu_it_was_promised(
    entrypoint: ModuleType, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has a GPU: the train role would start")
    monkeypatch.setenv("PARLEY_TRAIN_DEVICE", "cuda")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.chdir(ROOT)
    assert entrypoint.main(["train"]) == 2  # returned before exec'ing Celery
    assert "PARLEY_TRAIN_DEVICE=cuda but torch sees no GPU" in capfd.readouterr().err


def test_the_train_start_up_check_prints_the_budget_on_the_cpu(entrypoint: ModuleType) -> None:
    result = subprocess.run(
        entrypoint.train_check_command({"PARLEY_BASE_MODEL": "/nowhere"}),
        cwd=ROOT,
        env={**os.environ, "PARLEY_TRAIN_DEVICE": "cpu"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "training on the cpu" in result.stdout
