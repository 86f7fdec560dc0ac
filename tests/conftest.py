from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import Launcher, clean_env, free_port


@dataclass
class Stack:
    launcher: Launcher
    web_url: str
    vllm_url: str
    admin_line: str


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The whole system started the way `make run` starts it, on free ports, once per session."""
    web_port, vllm_port = free_port(), free_port()
    env = clean_env(
        PARLEY_VAR_DIR=str(tmp_path_factory.mktemp("stack-var")),
        PARLEY_PORT=str(web_port),
        VLLM_PORT=str(vllm_port),
    )
    for name in ("DJANGO_SUPERUSER_USERNAME", "DJANGO_SUPERUSER_PASSWORD"):
        env.pop(name, None)
    launcher = Launcher(env)
    try:
        launcher.wait_for(
            "Parley is ready at", timeout=float(os.environ.get("PARLEY_STACK_TIMEOUT", 900))
        )
        admin_line = launcher.wait_for("created the admin account", timeout=5)
        yield Stack(
            launcher=launcher,
            web_url=f"http://127.0.0.1:{web_port}",
            vllm_url=f"http://127.0.0.1:{vllm_port}/v1",
            admin_line=admin_line,
        )
    finally:
        try:
            launcher.interrupt()
        finally:
            launcher.kill()


@pytest.fixture(scope="session")
def prepared_model() -> Path:
    """The real base-model folder, prepared by the project's own command (a no-op when done)."""
    import subprocess
    import sys

    from tests.helpers import ROOT, clean_env

    env = clean_env()
    subprocess.run([sys.executable, "manage.py", "prepare_model"], cwd=ROOT, env=env, check=True)
    return ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
