"""The GPU host check's vLLM (``bench/gpu_check.py``): started as the `serve` process starts it,
with LoRA, and one streamed chat with it that returns the sampled token ids and their
log-probs, as Parley asks for them."""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import stop_process_group

BASE_NAME = "base"


class CheckFailed(RuntimeError):
    """A step failed; the message names it."""


def say(message: str) -> None:
    print(f"gpu_check | {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_command(args: argparse.Namespace, port: int) -> tuple[list[str], dict[str, str]]:
    """vLLM's OpenAI server as the `serve` process starts it, with this check's settings."""
    from webapp.infra.serving import VllmOptions, vllm_server_command

    extra = () if args.cpu else ("--gpu-memory-utilization", str(args.gpu_memory_utilization))
    return vllm_server_command(
        VllmOptions(
            model_dir=str(args.model),
            served_name=BASE_NAME,
            port=port,
            dtype="float32" if args.cpu else "bfloat16",
            max_loras=2,
            extra_args=extra,
            cpu_kvcache_space=2 if args.cpu else None,
        )
    )


@contextlib.contextmanager
def running_vllm(args: argparse.Namespace, log_path: Path) -> Iterator[tuple[str, float]]:
    """vLLM in its own process group; yields (base URL, seconds until /health answered)."""
    port = args.port or free_port()
    command, env = vllm_command(args, port)
    started = time.perf_counter()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        last_report = started
        while True:
            if process.poll() is not None:
                raise CheckFailed(
                    f"vLLM exited with {process.returncode} while starting; its log ends:\n"
                    + _tail(log_path)
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            now = time.perf_counter()
            if now - started > args.start_timeout:
                raise CheckFailed(
                    f"vLLM did not answer /health in {args.start_timeout:.0f} s; log:\n"
                    + _tail(log_path)
                )
            if now - last_report >= 15:
                say(f"waiting for vLLM: {now - started:.0f} s")
                last_report = now
            time.sleep(1)
        yield f"{url}/v1", time.perf_counter() - started
    finally:
        stop_process_group(process)


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Choice:
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""


@dataclass
class ChatResult:
    ttft_s: float
    total_s: float
    completion_tokens: int
    prompt_token_ids: list[int]
    choices: list[Choice]

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens after the first over the time after the first (one stream's decode speed)."""
        per_choice = self.completion_tokens / max(1, len(self.choices))
        decode_s = self.total_s - self.ttft_s
        return (per_choice - 1) / decode_s if decode_s > 0 and per_choice > 1 else 0.0


def chat(
    base_url: str, model: str, messages: list[dict[str, str]], *, max_tokens: int, n: int = 1
) -> ChatResult:
    """One streamed chat completion with the sampled token ids and log-probs, as Parley asks."""
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 1.0,
        "n": n,
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
        "return_token_ids": True,
    }
    choices = [Choice() for _ in range(n)]
    prompt_ids: list[int] = []
    usage_tokens = 0
    first: float | None = None
    started = time.perf_counter()
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=300) as answer:
        if answer.status_code != 200:
            raise CheckFailed(
                f"chat with {model!r} answered {answer.status_code}: {answer.read()!r}"
            )
        for line in answer.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("prompt_token_ids") and not prompt_ids:
                prompt_ids = list(chunk["prompt_token_ids"])
            if chunk.get("usage"):
                usage_tokens = int(chunk["usage"]["completion_tokens"])
            for raw in chunk.get("choices") or []:
                choice = choices[raw["index"]]
                content = (raw.get("delta") or {}).get("content") or ""
                if content and first is None:
                    first = time.perf_counter() - started
                choice.text += content
                choice.token_ids.extend(raw.get("token_ids") or [])
                for item in (raw.get("logprobs") or {}).get("content") or []:
                    choice.logprobs.append(float(item["logprob"]))
    total = time.perf_counter() - started
    if not prompt_ids or any(not c.token_ids for c in choices):
        raise CheckFailed(f"chat with {model!r} returned no token ids (return_token_ids)")
    for choice in choices:
        if len(choice.token_ids) != len(choice.logprobs):
            raise CheckFailed(
                f"{len(choice.token_ids)} token ids but {len(choice.logprobs)} log-probs"
            )
    return ChatResult(
        ttft_s=first if first is not None else total,
        total_s=total,
        completion_tokens=usage_tokens or sum(len(c.token_ids) for c in choices),
        prompt_token_ids=prompt_ids,
        choices=choices,
    )
