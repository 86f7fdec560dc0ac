"""The policy: a base model folder plus a LoRA adapter, scored token by token.

The base weights stay frozen (bf16 on a GPU, fp32 on the CPU: ``UpdateConfig.base_dtype``);
only the adapter trains, in fp32 whatever the base's precision. The teacher for distillation and
the reference for the KL penalty are the same network with the adapter switched off, so one
copy of the weights serves all three roles. Adapters are saved as peft writes them
(adapter_config.json + adapter_model.safetensors), which vLLM's /v1/load_lora_adapter loads.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
from collections.abc import Iterator
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch import Tensor
from torch.utils.checkpoint import checkpoint
from transformers import AutoModelForCausalLM, PreTrainedModel

from trainer.config import UpdateConfig

# Above this many scored tokens the vocabulary projection runs in chunks that are recomputed
# in the backward pass, so peak memory holds one chunk's logits (tokens × vocab), not all.
LOGIT_CHUNK_TOKENS = 2048
_LOGIT_TRANSFORMS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


DEVICE_SETTING = "PARLEY_TRAIN_DEVICE"


class TrainDeviceError(RuntimeError):
    """The training device the settings ask for is not there."""


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The device to train on: the given one, else what ``PARLEY_TRAIN_DEVICE`` says.

    "auto" (the default): CUDA when present (this process's GPU under a launcher that sets
    LOCAL_RANK, such as torchrun or accelerate), else the CPU. "cpu": the CPU. "cuda": the GPU,
    and no GPU is an error rather than hours of silent CPU training (a driver older than the
    one torch's CUDA build needs makes ``torch.cuda.is_available()`` false).
    """
    if device is not None:
        return torch.device(device)
    setting = os.environ.get(DEVICE_SETTING, "auto").strip().lower() or "auto"
    if setting not in ("auto", "cpu", "cuda"):
        raise TrainDeviceError(f"{DEVICE_SETTING}={setting!r}: use auto, cpu or cuda")
    if setting == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        if setting == "cuda":
            raise TrainDeviceError(
                f"{DEVICE_SETTING}=cuda but torch sees no GPU (torch {torch.__version__}, "
                f"built for CUDA {torch.version.cuda}): check nvidia-smi, the NVIDIA driver "
                "version docs/production.md names, and that the container was given the GPU"
            )
        return torch.device("cpu")
    local_rank = os.environ.get("LOCAL_RANK")
    return torch.device(f"cuda:{local_rank}" if local_rank is not None else "cuda")


def resolve_base_dtype(config: UpdateConfig, device: torch.device) -> torch.dtype:
    """bf16 on a GPU that has it, fp32 elsewhere, unless the config names one."""
    if config.base_dtype == "float32":
        return torch.float32
    if config.base_dtype == "bfloat16":
        return torch.bfloat16
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def uses_gradient_checkpointing(config: UpdateConfig, device: torch.device) -> bool:
    if config.gradient_checkpointing is not None:
        return config.gradient_checkpointing
    return device.type == "cuda"


def max_serving_lora_rank() -> int:
    """vLLM's --max-lora-rank, from the same setting the serving command reads."""
    return int(os.environ.get("VLLM_MAX_LORA_RANK") or 16)


def load_policy(
    base_model_dir: str | Path,
    config: UpdateConfig,
    *,
    init_adapter_dir: str | Path | None = None,
    device: str | torch.device | None = None,
) -> PeftModel:
    """The frozen base with a trainable fp32 LoRA adapter: a new one, or a saved one continued.

    A new adapter is initialised from ``config.seed`` (A random, B zero, so it starts as the
    base model). A continued adapter keeps its own rank and targets; the config's are ignored.
    An adapter whose rank exceeds serving's ``VLLM_MAX_LORA_RANK`` is refused: vLLM could not
    load what this would train.
    """
    dev = pick_device(device)
    base = AutoModelForCausalLM.from_pretrained(
        str(base_model_dir), dtype=resolve_base_dtype(config, dev)
    )
    return policy_from_base(base, config, init_adapter_dir=init_adapter_dir, device=dev)


def policy_from_base(
    base: PreTrainedModel,
    config: UpdateConfig,
    *,
    init_adapter_dir: str | Path | None = None,
    device: str | torch.device | None = None,
) -> PeftModel:
    """``load_policy`` for a base model already in memory (``bench/gpu_train_check.py`` builds
    a random one on the GPU rather than writing gigabytes to disk first)."""
    dev = pick_device(device)
    base.config.use_cache = False
    if uses_gradient_checkpointing(config, dev):
        # Non-reentrant checkpointing needs no grad-requiring inputs, so frozen embeddings work.
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    torch.manual_seed(config.seed)
    if init_adapter_dir is not None:
        model = PeftModel.from_pretrained(base, str(init_adapter_dir), is_trainable=True)
    else:
        model = get_peft_model(base, lora_config(config))
    rank = model.peft_config["default"].r
    if rank > max_serving_lora_rank():
        raise ValueError(
            f"LoRA rank {rank} exceeds serving's VLLM_MAX_LORA_RANK={max_serving_lora_rank()}"
        )
    for param in trainable_parameters(model):
        param.data = param.data.float()  # the adapter trains in fp32 over a bf16 base
    return model.to(dev)


def lora_config(config: UpdateConfig) -> LoraConfig:
    """peft's config for a new adapter of this update's rank, alpha, dropout and targets."""
    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )


def release_memory(device: torch.device) -> None:
    """Return cached GPU blocks to the driver, so an idle worker does not hold its peak."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [param for param in model.parameters() if param.requires_grad]


def _has_adapters(model: torch.nn.Module) -> bool:
    """A base under adapters: peft's ``PeftModel``, or anything with its two methods
    ``get_base_model`` and ``disable_adapter`` (``trainer.stacked_lora.StackedPolicy``)."""
    return isinstance(model, PeftModel) or (
        hasattr(model, "get_base_model") and hasattr(model, "disable_adapter")
    )


@contextlib.contextmanager
def adapter_disabled(model: torch.nn.Module) -> Iterator[None]:
    """Within the block the model is the frozen base (teacher = base, KL reference)."""
    if _has_adapters(model):
        with model.disable_adapter():  # type: ignore[operator]
            yield
    else:
        yield


def lora_snapshot(model: torch.nn.Module) -> dict[str, Tensor]:
    """A copy of the trainable (LoRA) weights: the live version, kept before an update."""
    return {
        name: param.detach().clone()
        for name, param in model.named_parameters()
        if param.requires_grad
    }


@contextlib.contextmanager
def lora_weights(model: torch.nn.Module, weights: dict[str, Tensor]) -> Iterator[None]:
    """Within the block the LoRA weights are ``weights`` (a ``lora_snapshot``); restored after.

    How the gate measures the live version on the same model in memory, without a reload.
    """
    params = dict(model.named_parameters())
    saved = {name: params[name].detach().clone() for name in weights}
    with torch.no_grad():
        for name, value in weights.items():
            params[name].copy_(value)
    try:
        yield
    finally:
        with torch.no_grad():
            for name, value in saved.items():
                params[name].copy_(value)


def _causal_lm(model: torch.nn.Module) -> PreTrainedModel:
    return model.get_base_model() if _has_adapters(model) else model  # type: ignore[operator,return-value]


def token_logprobs(
    model: torch.nn.Module,
    input_ids_B_T: Tensor,
    attention_mask_B_T: Tensor,
    response_mask_B_T: Tensor,
    temperature_B: Tensor | None = None,
) -> Tensor:
    """log p(token_t | tokens_<t) for every masked token of the given ids, 0 elsewhere: (B, T).

    ``temperature_B``: each row's logits are divided by it first (the distribution the row was
    sampled from at that temperature); None is temperature 1.

    The logits at position t − 1 score the token at t (the usual shift by one). Only the
    masked positions go through the vocabulary projection and log-softmax: the prompt's logits
    are never materialised, which is most of the saving over a full ``model(...).logits``.
    """
    lm = _causal_lm(model)
    scaled = [name for name in _LOGIT_TRANSFORMS if getattr(lm.config, name, None) is not None]
    if scaled:
        # We apply the LM head ourselves; these configs change logits after it.
        raise NotImplementedError(f"models with {scaled[0]} are not supported")
    target_mask_B_T = response_mask_B_T.bool().clone()
    target_mask_B_T[:, 0] = False  # the first token has no context to be predicted from
    predict_mask_B_T = torch.zeros_like(target_mask_B_T)
    predict_mask_B_T[:, :-1] = target_mask_B_T[:, 1:]

    hidden_B_T_H = lm.get_decoder()(
        input_ids=input_ids_B_T, attention_mask=attention_mask_B_T, use_cache=False
    ).last_hidden_state
    hidden_N_H = hidden_B_T_H[predict_mask_B_T]
    targets_N = input_ids_B_T[target_mask_B_T]
    if temperature_B is None:
        temperature_B = torch.ones(input_ids_B_T.shape[0], device=input_ids_B_T.device)
    temperature_N = temperature_B.to(hidden_N_H.device)[:, None].expand(target_mask_B_T.shape)[
        target_mask_B_T
    ]
    head = lm.get_output_embeddings()
    if hidden_N_H.shape[0] <= LOGIT_CHUNK_TOKENS or not torch.is_grad_enabled():
        logp_N = _selected_logprobs(head, hidden_N_H, targets_N, temperature_N)
    else:
        chunks = [
            checkpoint(_selected_logprobs, head, hidden, targets, temps, use_reentrant=False)
            for hidden, targets, temps in zip(
                hidden_N_H.split(LOGIT_CHUNK_TOKENS),
                targets_N.split(LOGIT_CHUNK_TOKENS),
                temperature_N.split(LOGIT_CHUNK_TOKENS),
                strict=True,
            )
        ]
        logp_N = torch.cat(chunks)
    logp_B_T = torch.zeros(target_mask_B_T.shape, dtype=logp_N.dtype, device=logp_N.device)
    return logp_B_T.masked_scatter(target_mask_B_T, logp_N)


def _selected_logprobs(
    head: torch.nn.Module, hidden_N_H: Tensor, targets_N: Tensor, temperature_N: Tensor
) -> Tensor:
    """log_softmax(head(hidden) / T)[target] without keeping the normalised (N, V) tensor."""
    logits_N_V = head(hidden_N_H).float() / temperature_N[:, None]
    picked_N = logits_N_V.gather(-1, targets_N.unsqueeze(-1)).squeeze(-1)
    return picked_N - torch.logsumexp(logits_N_V, dim=-1)


def save_adapter(model: PeftModel, out_dir: str | Path) -> Path:
    """Write adapter_config.json + adapter_model.safetensors, the layout vLLM loads."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True, save_embedding_layers=False)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        if not (out / name).is_file():
            raise RuntimeError(f"{out / name} was not written")
    return out


def peak_memory(device: torch.device) -> dict[str, float | None]:
    """Peak resident memory of this process so far (Linux reports KiB), and peak GPU memory
    allocated by tensors and reserved by torch's caching allocator (what nvidia-smi sees)."""
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    on_gpu = device.type == "cuda"
    return {
        "peak_rss_mb": rss_mb,
        "peak_gpu_mb": torch.cuda.max_memory_allocated(device) / 2**20 if on_gpu else None,
        "peak_gpu_reserved_mb": torch.cuda.max_memory_reserved(device) / 2**20 if on_gpu else None,
    }
