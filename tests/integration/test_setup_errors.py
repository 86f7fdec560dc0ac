"""Bad set-up stops `make run` at once with one line that says what to do."""

from __future__ import annotations

import socket
import subprocess
import sys

from bench.launching import clean_env, free_port
from tests.helpers import ROOT


def _run_launcher(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webapp.infra.launcher", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_a_port_already_taken(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run_launcher(clean_env(PARLEY_PORT=str(port), PARLEY_VAR_DIR=str(tmp_path)))
    assert result.returncode == 2
    lines = _error_lines(result)
    assert len(lines) == 1, result.stderr
    assert f"port {port}" in lines[0] and "already in use" in lines[0] and "PARLEY_PORT" in lines[0]


def test_an_unreachable_database_url(tmp_path) -> None:
    env = clean_env(
        DATABASE_URL="postgres://parley:secret@127.0.0.1:1/parley",
        REDIS_URL="redis://127.0.0.1:1/0",
        DJANGO_SECRET_KEY="test-only",
        PARLEY_PORT=str(free_port()),
        VLLM_PORT=str(free_port()),
        PARLEY_VAR_DIR=str(tmp_path),
    )
    result = _run_launcher(env)
    assert result.returncode == 2
    lines = _error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "cannot reach the database" in lines[0] and "unset DATABASE_URL" in lines[0]
    assert "secret" not in lines[0]


def test_a_missing_base_model_folder(tmp_path) -> None:
    env = clean_env(
        PARLEY_BASE_MODEL=str(tmp_path / "no-such-model"),
        PARLEY_PORT=str(free_port()),
        VLLM_PORT=str(free_port()),
        PARLEY_VAR_DIR=str(tmp_path),
    )
    result = _run_launcher(env)
    assert result.returncode != 0
    lines = _error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "no-such-model" in lines[0] and "PARLEY_BASE_MODEL" in lines[0]
