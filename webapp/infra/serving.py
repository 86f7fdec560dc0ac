"""The `serve` process: vLLM's OpenAI server for the base model, with runtime LoRA loading
(or, with PARLEY_ENGINE=llamacpp, the llama.cpp engine behind the same routes:
``webapp.infra.llamacpp_server``).

The base model is served under the name ``base``; published policy versions are LoRA
adapters loaded next to it at run time (``/v1/load_lora_adapter``), one per lineage in use:
vLLM runs up to ``PARLEY_MAX_LORAS`` of them in one batch and keeps ``PARLEY_MAX_CPU_LORAS``
in CPU memory, evicting the least recently used; a request whose adapter this server does not
know yet (after a restart, or from a person whose home is another replica) has it loaded first
(``webapp.inference.adapter_load``), and versions no longer live are unloaded by the periodic
sweep (``webapp.learning.workflows.residency``).

vLLM is started with Parley's API key (``VLLM_API_KEY`` in its environment, which vLLM reads
like ``--api-key`` but which ``ps`` does not show): every ``/v1`` path, the adapter endpoints
included, refuses a call without it. Some of vLLM's other paths (``/invocations``,
``/tokenize``, ``/metrics``) have no authentication at all, so it still binds to 127.0.0.1
(VLLM_HOST) unless told otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from dataclasses import dataclass

BASE_SERVED_NAME = "base"


@dataclass(frozen=True)
class VllmOptions:
    """What differs between one start of vLLM's OpenAI server and another."""

    model_dir: str
    port: int
    dtype: str
    host: str = "127.0.0.1"
    served_name: str = BASE_SERVED_NAME
    max_model_len: int = 8192
    max_lora_rank: int = 16
    max_loras: int = 4
    max_cpu_loras: int = 32
    # Tool calls for API clients: "auto" needs a parser (Hermes-style <tool_call> JSON);
    # "required" and named tools use guided decoding and work with any model.
    tool_call_parser: str | None = None
    lora_modules: tuple[tuple[str, str], ...] = ()
    extra_args: tuple[str, ...] = ()
    cpu_kvcache_space: int | None = None
    # vLLM's share of the GPU, as in docker (the CPU build ignores it: VLLM_CPU_KVCACHE_SPACE).
    gpu_memory_utilization: float | None = None
    api_key: str = ""  # passed in vLLM's environment, not on its command line
    # Requests are scheduled by their "priority" field (lower first): the LLM judge shares this
    # server with chat and asks with a higher number, so a flood of judging never delays chat.
    scheduling_policy: str = "priority"


def vllm_server_command(options: VllmOptions) -> tuple[list[str], dict[str, str]]:
    """The one vLLM command line (argv and environment): `serve` and bench/gpu_check use it."""
    # The module form, deprecated in favour of `vllm serve` (which docker uses): vllm-cpu's
    # `vllm` command looks up package metadata named "vllm" and fails before parsing anything.
    args = [
        sys.executable,
        *("-m", "vllm.entrypoints.openai.api_server"),
        *("--model", options.model_dir, "--served-model-name", options.served_name),
        *("--host", options.host, "--port", str(options.port)),
        *("--dtype", options.dtype, "--max-model-len", str(options.max_model_len)),
        *("--enable-lora", "--max-lora-rank", str(options.max_lora_rank)),
        *("--max-loras", str(options.max_loras), "--max-cpu-loras", str(options.max_cpu_loras)),
        # Log-probs after the temperature (and any top-k/top-p) the answer was sampled with:
        # the behaviour policy the trainer's importance weights divide by (trainer.batch.Sample).
        *("--logprobs-mode", "processed_logprobs"),
        "--disable-uvicorn-access-log",
        *("--scheduling-policy", options.scheduling_policy),
    ]
    if options.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", str(options.gpu_memory_utilization)]
    if options.tool_call_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", options.tool_call_parser]
    args += options.extra_args
    for name, path in options.lora_modules:
        args += ["--lora-modules", f"{name}={path}"]
    env = dict(os.environ)
    if options.api_key:
        env["VLLM_API_KEY"] = options.api_key
    env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")
    if options.cpu_kvcache_space is not None:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.cpu_kvcache_space))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    return args, env


def vllm_command() -> tuple[list[str], dict[str, str]]:
    """The `serve` process's command, from the settings."""
    from django.conf import settings

    live = live_adapters(limit=settings.MAX_CPU_LORAS)
    # A serving worker that (re)starts loads the live adapters before it takes traffic.
    return vllm_server_command(
        VllmOptions(
            model_dir=str(settings.BASE_MODEL_DIR),
            host=settings.VLLM_HOST,
            port=settings.VLLM_PORT,
            dtype=serving_dtype(settings.VLLM_DTYPE, cuda=_cuda_available()),
            max_model_len=settings.VLLM_MAX_MODEL_LEN,
            max_lora_rank=settings.VLLM_MAX_LORA_RANK,
            tool_call_parser=settings.VLLM_TOOL_CALL_PARSER,
            extra_args=tuple(shlex.split(settings.VLLM_EXTRA_ARGS)),
            lora_modules=tuple(live),
            max_loras=settings.MAX_LORAS,
            max_cpu_loras=settings.MAX_CPU_LORAS,
            cpu_kvcache_space=settings.VLLM_CPU_KVCACHE_SPACE,
            api_key=settings.VLLM_API_KEY,
            gpu_memory_utilization=settings.VLLM_GPU_MEMORY_UTILIZATION,
        )
    )


def llamacpp_command() -> tuple[list[str], dict[str, str]]:
    """The `serve` process's command when PARLEY_ENGINE is llamacpp: the base model's GGUF
    (fetched beside the model folder when missing), its tokenizer, and the live adapters."""
    from django.conf import settings

    from trainer.base_model import ModelError, fetch_gguf

    if settings.PARLEY_BASE_MODEL and not settings.SERVING_GGUF:
        raise ModelError("PARLEY_ENGINE=llamacpp with PARLEY_BASE_MODEL needs PARLEY_GGUF")
    gguf = settings.SERVING_GGUF or fetch_gguf(cache_dir=settings.MODEL_CACHE_DIR)
    args = [
        sys.executable,
        *("-m", "webapp.infra.llamacpp_server"),
        *("--gguf", str(gguf), "--tokenizer", str(settings.BASE_MODEL_DIR)),
        *("--host", settings.VLLM_HOST, "--port", str(settings.VLLM_PORT)),
        *("--max-model-len", str(settings.VLLM_MAX_MODEL_LEN)),
        *("--max-cpu-loras", str(settings.MAX_CPU_LORAS)),
        *("--threads", str(settings.SERVE_THREADS)),
    ]
    live = live_adapters(limit=settings.MAX_CPU_LORAS)
    if live:
        args += ["--lora-modules", *(f"{name}={path}" for name, path in live)]
    env = dict(os.environ)
    if settings.VLLM_API_KEY:
        env["VLLM_API_KEY"] = settings.VLLM_API_KEY
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return args, env


def serving_engine(setting: str, *, cuda: bool, llamacpp: bool, own_model: bool) -> str:
    """PARLEY_ENGINE, with "auto" resolved: vLLM on a GPU, llama.cpp on a CPU where it is
    installed and has a GGUF of the model (the default model's ships with it; another model
    needs PARLEY_GGUF), vLLM otherwise.

    >>> serving_engine("auto", cuda=False, llamacpp=True, own_model=False)
    'llamacpp'
    >>> serving_engine("auto", cuda=True, llamacpp=True, own_model=False)
    'vllm'
    >>> serving_engine("auto", cuda=False, llamacpp=True, own_model=True)
    'vllm'
    >>> serving_engine("vllm", cuda=False, llamacpp=True, own_model=False)
    'vllm'
    """
    if setting != "auto":
        return setting
    return "llamacpp" if llamacpp and not cuda and not own_model else "vllm"


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


def live_adapters(*, limit: int) -> list[tuple[str, str]]:
    """(served name, adapter folder) of each lineage's live adapter, the shared one first, then
    the most recently published, at most ``limit``; a version whose folder is gone is left out.
    """
    from django.conf import settings
    from django.db import DatabaseError

    try:
        from webapp.learning.models import PolicyVersion

        live = list(
            PolicyVersion.objects.filter(status=PolicyVersion.Status.LIVE, number__gt=0).order_by(
                "-published_at", "-number"
            )
        )
    except DatabaseError as exc:
        print(f"serve: cannot read the live versions ({exc}); starting with the base model only")
        return []
    live.sort(key=lambda version: version.owner_id is not None)  # stable: the shared one first
    adapters = [
        (version.served_name(settings.PARLEY_MODEL_ID), version.adapter_path)
        for version in live
        if os.path.isdir(version.adapter_path)
    ]
    return adapters[:limit]


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
    engine = serving_engine(
        settings.SERVING_ENGINE,
        cuda=_cuda_available(),
        llamacpp=importlib.util.find_spec("llama_cpp") is not None,
        own_model=bool(settings.PARLEY_BASE_MODEL) and not settings.SERVING_GGUF,
    )
    print(f"serve: engine {engine} (PARLEY_ENGINE={settings.SERVING_ENGINE})", flush=True)
    try:
        args, env = llamacpp_command() if engine == "llamacpp" else vllm_command()
    except ModelError as exc:
        print(f"serve: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    # exec: vLLM becomes this process, so honcho's signals reach it directly.
    os.execvpe(args[0], args, env)


if __name__ == "__main__":
    main()
