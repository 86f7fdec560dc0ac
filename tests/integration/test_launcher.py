"""Ctrl-C stops everything, embedded databases included; a second start reuses var/."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import psutil

from bench.launching import Launcher, clean_env, free_port


def _postgres_processes(data_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(data_dir) in " ".join(
            proc.info["cmdline"] or []
        ):
            found.append(proc)
    return found


def _start(var: Path, port: int) -> tuple[Launcher, float]:
    started = time.monotonic()
    launcher = Launcher(clean_env(PARLEY_VAR_DIR=str(var), PARLEY_PORT=str(port), PARLEY_SERVE="0"))
    launcher.wait_for("Parley is ready at", timeout=300)
    return launcher, time.monotonic() - started


def test_ctrl_c_stops_everything_and_a_second_start_reuses_var(tmp_path: Path) -> None:
    var = tmp_path / "var"
    port = free_port()
    launcher, first = _start(var, port)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        assert _postgres_processes(var / "postgres")
        assert launcher.interrupt() == 0
    finally:
        launcher.kill()
    assert "embedded PostgreSQL and Redis stopped" in launcher.output
    assert not _postgres_processes(var / "postgres")
    assert not (var / "run" / "infra.json").exists()
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(var) in " ".join(p.info["cmdline"] or [])
        and "redis" in " ".join(p.info["cmdline"] or [])
    ]
    created = "created the admin account" in launcher.output

    again, second = _start(var, port)
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        assert created and "created the admin account" not in again.output
        assert again.interrupt() == 0
    finally:
        again.kill()
    print(f"first start {first:.1f} s, second start {second:.1f} s")
