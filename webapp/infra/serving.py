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
        settings.VLLM_DTYPE,
        "--max-model-len",
        str(settings.VLLM_MAX_MODEL_LEN),
        "--enable-lora",
        "--max-lora-rank",
        str(settings.VLLM_MAX_LORA_RANK),
        "--max-loras",
        "4",
        "--disable-uvicorn-access-log",
        *shlex.split(settings.VLLM_EXTRA_ARGS),
    ]
    env = dict(os.environ)
    env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings.VLLM_CPU_KVCACHE_SPACE))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    return args, env


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
