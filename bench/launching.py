"""Running Parley as a user would, for the benchmarks and the tests: the launcher in the
background with its output captured, a fresh shell's environment, a free port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**overrides: str) -> dict[str, str]:
    """The environment of a fresh shell: no infrastructure URLs inherited from the test run."""
    # VLLM_API_KEY too: each started system keeps its own key in its own var/.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "VLLM_API_KEY"}
    }
    env.update(PYTHONUNBUFFERED="1", PARLEY_MODELS_DIR=str(ROOT / "var" / "models"))
    env.update(overrides)
    return env


def start_worker(
    queue: str, name: str, env: dict[str, str], *, app: str = "webapp", quiet: bool = False
) -> subprocess.Popen[bytes]:
    """A real Celery worker on one queue, in its own process group (``stop_worker`` kills it
    whole). ``app``: the module of its Celery app (``bench.modelled_training``: updates take a
    set time instead of training); ``quiet``: its output goes nowhere."""
    out = subprocess.DEVNULL if quiet else None
    return subprocess.Popen(
        [
            *(PYTHON, "-m", "celery", "-A", app, "worker", "-Q", queue, "-n", f"{name}@%h"),
            *("--concurrency", "1", "--loglevel", "WARNING"),
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=out,
        stderr=out,
    )


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """Kill a worker from ``start_worker`` and its children at once (SIGKILL, as a crash)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)


class Launcher:
    """``python -m webapp.infra.launcher run`` in the background, with its output captured."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [PYTHON, "-m", "webapp.infra.launcher", "run"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if os.environ.get("PARLEY_TEST_ECHO"):
                print(line, end="", file=sys.stderr)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(f"launcher never printed {text!r}; output:\n{self.output[-6000:]}")

    def interrupt(self, timeout: float = 90) -> int:
        """Ctrl-C, as a terminal sends it to the whole foreground process group."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            raise

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
