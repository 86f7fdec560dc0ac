"""What bench.lora_serving serves: distinct LoRA adapters made cheaply from one peft adapter,
and one vLLM started with the command line Parley's `serve` process uses."""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import stop_process_group
from bench.lora_serving_figures import adapter_name


def say(message: str) -> None:
    print(f"lora_serving | {message}", flush=True)


def make_adapters(
    base_model_dir: str | Path, out_dir: str | Path, count: int, *, scale: float = 0.08
) -> list[Path]:
    """``count`` distinct LoRA adapter folders for the base model, as Parley's trainer saves them.

    One adapter is created with peft at ``UpdateConfig``'s rank and target modules (A random,
    B zero), then copied ``count`` times with every ``lora_B`` replaced by N(0, scale²) values
    from the copy's own seed, so each adapter changes the model's output, and differently.
    At 0.02 the base model's greedy answers came back unchanged; at 0.05-0.1 they differ from
    the base's and from each other's and stay fluent.
    """
    import torch
    from safetensors.torch import load_file, save_file

    from trainer.config import UpdateConfig
    from trainer.policy import load_policy, save_adapter

    out = Path(out_dir)
    template = save_adapter(
        load_policy(base_model_dir, UpdateConfig(), device="cpu"), out / "template"
    )
    weights = load_file(str(template / "adapter_model.safetensors"))
    folders = []
    for index in range(count):
        generator = torch.Generator().manual_seed(1000 + index)
        copy = {
            name: torch.randn(tensor.shape, generator=generator) * scale
            if "lora_B" in name
            else tensor.contiguous()
            for name, tensor in weights.items()
        }
        folder = out / adapter_name(index)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(copy, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
        shutil.copy(template / "adapter_config.json", folder / "adapter_config.json")
        folders.append(folder)
    return folders


@dataclass
class Server:
    url: str  # …/v1
    headers: dict[str, str]
    pid: int
    log_path: Path
    started_s: float = field(default=0.0)

    def rss_mb(self) -> float:
        """Resident memory of the API server and every process it spawned (the engine core)."""
        import psutil

        root = psutil.Process(self.pid)
        total = 0
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                total += process.memory_info().rss
        return total / 2**20


@contextlib.contextmanager
def running_vllm(
    model_dir: Path,
    *,
    max_loras: int,
    max_cpu_loras: int,
    log_path: Path,
    timeout_s: float,
    api_key: str = "",
) -> Iterator[Server]:
    """vLLM alone, with the command line Parley's `serve` process uses, on a free port (with
    ``api_key``, or a new random one)."""
    from bench.launching import free_port
    from webapp.infra.serving import VllmOptions, serving_dtype, vllm_server_command

    port, key = free_port(), api_key or secrets.token_urlsafe(32)
    command, env = vllm_server_command(
        VllmOptions(
            model_dir=str(model_dir),
            port=port,
            dtype=serving_dtype("auto", cuda=False),
            max_loras=max_loras,
            extra_args=("--max-cpu-loras", str(max_cpu_loras)),
            cpu_kvcache_space=2,
            api_key=key,
        )
    )
    with running_server(
        "vLLM", command, env, port=port, key=key, log_path=log_path, timeout_s=timeout_s
    ) as server:
        yield server


@contextlib.contextmanager
def running_server(
    name: str,
    command: list[str],
    env: dict[str, str],
    *,
    port: int,
    key: str,
    log_path: Path,
    timeout_s: float,
) -> Iterator[Server]:
    """A model server started with ``command``, once it answers ``/health``; stopped after."""
    started = time.perf_counter()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url, last_report = f"http://127.0.0.1:{port}", started
        while True:
            if process.poll() is not None:
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
                raise RuntimeError(
                    f"{name} exited with {process.returncode}; its log ends:\n{tail}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            now = time.perf_counter()
            if now - started > timeout_s:
                raise RuntimeError(
                    f"{name} did not answer /health in {timeout_s:.0f} s: {log_path}"
                )
            if now - last_report >= 15:
                say(f"waiting for {name} to start: {now - started:.0f} s")
                last_report = now
            time.sleep(0.5)
        elapsed = time.perf_counter() - started
        say(f"{name} ready in {elapsed:.0f} s (pid {process.pid}, log {log_path})")
        yield Server(
            f"{url}/v1", {"Authorization": f"Bearer {key}"}, process.pid, log_path, elapsed
        )
    finally:
        stop_process_group(process)
