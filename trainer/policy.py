"""The policy: a base model folder plus a LoRA adapter, scored token by token.

The base weights stay frozen in fp32; only the adapter trains. The teacher for distillation and
the reference for the KL penalty are the same network with the adapter switched off, so one
copy of the weights serves all three roles. Adapters are saved as peft writes them
(adapter_config.json + adapter_model.safetensors), which vLLM's /v1/load_lora_adapter loads.
"""

from __future__ import annotations

import contextlib
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


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The given device, else CUDA when present (this process's GPU under a launcher that sets
    LOCAL_RANK, such as torchrun or accelerate), else the CPU."""
    if device is not None:
        return torch.device(device)
    if not torch.cuda.is_available():
        return torch.device("cpu")
    local_rank = os.environ.get("LOCAL_RANK")
    return torch.device(f"cuda:{local_rank}" if local_rank is not None else "cuda")


def load_policy(
    base_model_dir: str | Path,
    config: UpdateConfig,
    *,
    init_adapter_dir: str | Path | None = None,
    device: str | torch.device | None = None,
) -> PeftModel:
    """The base model in fp32 with a trainable LoRA adapter: a new one, or a saved one continued.

    A new adapter is initialised from ``config.seed`` (A random, B zero, so it starts as the
    base model). A continued adapter keeps its own rank and targets; the config's are ignored.
    """
    base = AutoModelForCausalLM.from_pretrained(str(base_model_dir), dtype=torch.float32)
    base.config.use_cache = False
    torch.manual_seed(config.seed)
    if init_adapter_dir is not None:
        model = PeftModel.from_pretrained(base, str(init_adapter_dir), is_trainable=True)
    else:
        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(base, lora)
    return model.to(pick_device(device))


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [param for param in model.parameters() if param.requires_grad]


@contextlib.contextmanager
def adapter_disabled(model: torch.nn.Module) -> Iterator[None]:
    """Within the block the model is the frozen base (teacher = base, KL reference)."""
    if isinstance(model, PeftModel):
        with model.disable_adapter():
            yield
    else:
        yield


def _causal_lm(model: torch.nn.Module) -> PreTrainedModel:
    return model.get_base_model() if isinstance(model, PeftModel) else model


def token_logprobs(
    model: torch.nn.Module,
    input_ids_B_T: Tensor,
    attention_mask_B_T: Tensor,
    response_mask_B_T: Tensor,
) -> Tensor:
    """log p(token_t | tokens_<t) for every masked token of the given ids, 0 elsewhere: (B, T).

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
    head = lm.get_output_embeddings()
    if hidden_N_H.shape[0] <= LOGIT_CHUNK_TOKENS or not torch.is_grad_enabled():
        logp_N = _selected_logprobs(head, hidden_N_H, targets_N)
    else:
        chunks = [
            checkpoint(_selected_logprobs, head, hidden, targets, use_reentrant=False)
            for hidden, targets in zip(
                hidden_N_H.split(LOGIT_CHUNK_TOKENS),
                targets_N.split(LOGIT_CHUNK_TOKENS),
                strict=True,
            )
        ]
        logp_N = torch.cat(chunks)
    logp_B_T = torch.zeros(target_mask_B_T.shape, dtype=logp_N.dtype, device=logp_N.device)
    return logp_B_T.masked_scatter(target_mask_B_T, logp_N)


def _selected_logprobs(head: torch.nn.Module, hidden_N_H: Tensor, targets_N: Tensor) -> Tensor:
    """log_softmax(head(hidden))[target] without keeping the normalised (N, V) tensor."""
    logits_N_V = head(hidden_N_H).float()
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
    """Peak resident memory of this process so far (Linux reports KiB), and peak GPU memory."""
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu_mb = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {"peak_rss_mb": rss_mb, "peak_gpu_mb": gpu_mb}
