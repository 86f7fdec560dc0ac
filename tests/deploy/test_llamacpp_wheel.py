"""The llama.cpp wheel is built once per machine: the pin is read from its requirements file,
a wheel already built is used as it is, and the compiler's steps become a progress bar."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "llamacpp_wheel.py"


def _script():
    spec = importlib.util.spec_from_file_location("llamacpp_wheel", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pin_is_read_from_the_requirements_file() -> None:
    assert _script().pinned(ROOT / "requirements-llamacpp.txt") == "0.3.36"


def test_a_wheel_built_before_is_kept(tmp_path: Path) -> None:
    (tmp_path / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").write_bytes(b"")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), str(ROOT / "requirements-llamacpp.txt")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert "the wheel built on this machine is in" in result.stdout


def test_the_compilers_steps_are_read_as_progress() -> None:
    line = b"  [37/140] /usr/bin/g++ -DGGML_BUILD -O3 -c ggml-cpu.c"
    step = _script().STEP.search(line)
    assert step is not None and (step.group(1), step.group(2)) == (b"37", b"140")
