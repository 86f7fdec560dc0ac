"""How much GPU memory an update needs, and whether it fits beside vLLM: the arithmetic.

An update holds, at its peak:

- the frozen base weights: parameters × bytes per weight (2 in bf16);
- the LoRA adapter in fp32 with its gradient and AdamW's two moments: 16 bytes per parameter;
- the activations of one micro-batch. Without gradient checkpointing every layer keeps the
  inputs of its matmuls, norms and activation function for the backward pass, about
  (8·hidden + 3·intermediate) values per token per layer (attention runs through SDPA, so
  there is no tokens² term). With checkpointing each layer keeps only its input (hidden values
  per token) and one layer's full set exists at a time, while it is recomputed;
- one chunk of logits: ``LOGIT_CHUNK_TOKENS`` × vocabulary in the model's dtype, its fp32 copy
  and that copy's gradient (``trainer.policy.token_logprobs`` scores the vocabulary in chunks);
- with the language anchor on (``anchor_coef``), the base model's next-token distribution on
  the anchor paragraphs, fp32, kept for the whole update; the anchor's own pass (a few hundred
  tokens) is smaller than a micro-batch's, so the two terms above already cover it;
- a fixed allowance for the CUDA context, cuBLAS workspaces and allocator fragmentation.

What is left for it is the GPU's memory minus vLLM's share (``--gpu-memory-utilization`` is a
fraction of the whole GPU) when both use the same GPU. These are estimates, meant to refuse a
configuration that cannot fit before it runs out of memory half-way through an update, and
to say which number to change; ``bench/gpu_train_check.py`` measures the real peak.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig

from trainer.anchor import anchor_token_ids
from trainer.config import UpdateConfig
from trainer.policy import LOGIT_CHUNK_TOKENS, resolve_base_dtype, uses_gradient_checkpointing

log = logging.getLogger(__name__)

GIB = 2**30
OVERHEAD_GIB = 2.0
"""CUDA context (~0.5 GiB), cuBLAS/SDPA workspaces and allocator fragmentation."""
ANCHOR_TOKENS_ESTIMATE = 400
"""The anchor paragraphs' length where no tokenizer is at hand (367 in SmolLM2's)."""
LORA_BYTES_PER_PARAM = 16
"""fp32 weight + fp32 gradient + AdamW's two fp32 moments."""


class MemoryBudgetError(RuntimeError):
    """The configuration cannot fit in the memory left for training; the message says why."""


@dataclass(frozen=True)
class ModelShape:
    """The few numbers of a decoder-only transformer that decide its memory."""

    layers: int
    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    tied_embeddings: bool = True

    @classmethod
    def from_config(cls, config: Any) -> ModelShape:
        """From a transformers config (Llama, Qwen2, Qwen3 and the like)."""
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(
            layers=int(config.num_hidden_layers),
            hidden=int(config.hidden_size),
            intermediate=int(config.intermediate_size),
            vocab=int(config.vocab_size),
            heads=heads,
            kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
            head_dim=int(head_dim),
            tied_embeddings=bool(getattr(config, "tie_word_embeddings", True)),
        )

    def module_dims(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each projection LoRA may target."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        h, i = self.hidden, self.intermediate
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    @property
    def parameters(self) -> int:
        per_layer = sum(a * b for a, b in self.module_dims().values()) + 2 * self.hidden
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * per_layer + embeddings + self.hidden


# Public shapes of the model sizes docs/production.md shows the arithmetic for.
SHAPES: dict[str, ModelShape] = {
    "0.5B (Qwen2.5-0.5B)": ModelShape(24, 896, 4864, 151936, 14, 2, 64, True),
    "4B (Qwen3-4B)": ModelShape(36, 2560, 9728, 151936, 32, 8, 128, True),
    "8B (Qwen3-8B)": ModelShape(36, 4096, 12288, 151936, 32, 8, 128, False),
}


def lora_parameters(shape: ModelShape, rank: int, targets: Sequence[str]) -> int:
    dims = shape.module_dims()
    return shape.layers * sum(rank * (dims[t][0] + dims[t][1]) for t in targets)


def activation_bytes_per_token(
    shape: ModelShape, dtype_bytes: int, *, gradient_checkpointing: bool
) -> int:
    """Bytes of saved activations per token of a micro-batch (see the module docstring)."""
    one_layer = dtype_bytes * (8 * shape.hidden + 3 * shape.intermediate)
    if not gradient_checkpointing:
        return shape.layers * one_layer
    return shape.layers * dtype_bytes * shape.hidden + one_layer


@dataclass(frozen=True)
class MemoryBudget:
    """One update's estimated peak, in GiB, against what is left for it on its GPU."""

    weights_gib: float
    lora_gib: float
    activations_mib_per_token: float
    micro_batch_tokens: int
    activations_gib: float
    logits_gib: float
    anchor_gib: float
    overhead_gib: float
    gpu_gib: float
    vllm_share: float

    @property
    def need_gib(self) -> float:
        return (
            self.weights_gib
            + self.lora_gib
            + self.activations_gib
            + self.logits_gib
            + self.anchor_gib
            + self.overhead_gib
        )

    @property
    def available_gib(self) -> float:
        return self.gpu_gib * (1.0 - self.vllm_share)

    @property
    def fits(self) -> bool:
        return self.need_gib <= self.available_gib

    def as_dict(self) -> dict[str, float | int | bool]:
        return {
            **asdict(self),
            "need_gib": self.need_gib,
            "available_gib": self.available_gib,
            "fits": self.fits,
        }

    def explain(self) -> str:
        """The arithmetic in one line, as printed at the start of an update."""
        return (
            f"weights {self.weights_gib:.1f} + LoRA and optimizer {self.lora_gib:.2f} "
            f"+ activations {self.activations_mib_per_token:.3f} MiB/token × "
            f"{self.micro_batch_tokens} tokens = {self.activations_gib:.1f} "
            f"+ logits {self.logits_gib:.1f} "
            + (f"+ anchor {self.anchor_gib:.2f} " if self.anchor_gib else "")
            + f"+ overhead {self.overhead_gib:.1f} "
            f"= {self.need_gib:.1f} GiB needed; GPU {self.gpu_gib:.0f} GiB × "
            f"(1 − vLLM's {self.vllm_share:.2f}) = {self.available_gib:.1f} GiB available"
        )


def memory_budget(
    shape: ModelShape,
    *,
    dtype_bytes: int,
    lora_rank: int,
    target_modules: Sequence[str],
    micro_batch_tokens: int,
    gradient_checkpointing: bool,
    gpu_gib: float,
    vllm_share: float,
    anchor_tokens: int = 0,
    overhead_gib: float = OVERHEAD_GIB,
) -> MemoryBudget:
    """The estimate for one model shape and training configuration (pure arithmetic).

    >>> b = memory_budget(SHAPES["4B (Qwen3-4B)"], dtype_bytes=2, lora_rank=16,
    ...     target_modules=["q_proj", "v_proj"], micro_batch_tokens=4096,
    ...     gradient_checkpointing=True, gpu_gib=80, vllm_share=0.85)
    >>> round(b.weights_gib, 1), b.fits
    (7.5, False)
    """
    per_token = activation_bytes_per_token(
        shape, dtype_bytes, gradient_checkpointing=gradient_checkpointing
    )
    logits_tokens = min(micro_batch_tokens, LOGIT_CHUNK_TOKENS)
    return MemoryBudget(
        weights_gib=shape.parameters * dtype_bytes / GIB,
        lora_gib=lora_parameters(shape, lora_rank, target_modules) * LORA_BYTES_PER_PARAM / GIB,
        activations_mib_per_token=per_token / 2**20,
        micro_batch_tokens=micro_batch_tokens,
        activations_gib=per_token * micro_batch_tokens / GIB,
        logits_gib=logits_tokens * shape.vocab * (dtype_bytes + 4 + 4) / GIB,
        anchor_gib=anchor_tokens * shape.vocab * 4 / GIB,
        overhead_gib=overhead_gib,
        gpu_gib=gpu_gib,
        vllm_share=vllm_share,
    )


def _gpu_ids(value: str | None) -> set[str]:
    return {part.strip() for part in (value or "").split(",") if part.strip()}


def vllm_share_of_training_gpu(env: Mapping[str, str]) -> float:
    """The fraction of the training GPU that vLLM holds, from the deployment's settings.

    ``PARLEY_TRAIN_VLLM_SHARE`` when set; else 0 when ``TRAIN_GPUS`` and ``VLLM_GPUS`` (the
    compose file's host GPU ids) are both given and disjoint; else vLLM shares the GPU and
    holds ``VLLM_GPU_MEMORY_UTILIZATION`` of it (0.85 unless set, vLLM's own default is 0.9).

    >>> vllm_share_of_training_gpu({"TRAIN_GPUS": "1", "VLLM_GPUS": "0"})
    0.0
    >>> vllm_share_of_training_gpu({"TRAIN_GPUS": "0", "VLLM_GPUS": "0,1",
    ...                             "VLLM_GPU_MEMORY_UTILIZATION": "0.6"})
    0.6
    """
    if env.get("PARLEY_TRAIN_VLLM_SHARE"):
        return float(env["PARLEY_TRAIN_VLLM_SHARE"])
    train, serve = _gpu_ids(env.get("TRAIN_GPUS")), _gpu_ids(env.get("VLLM_GPUS"))
    if train and serve and not train & serve:
        return 0.0
    return float(env.get("VLLM_GPU_MEMORY_UTILIZATION") or 0.85)


def check_budget(budget: MemoryBudget) -> MemoryBudget:
    """Log the arithmetic; raise ``MemoryBudgetError`` with it when the update cannot fit."""
    log.info("training memory budget: %s", budget.explain())
    if not budget.fits:
        raise MemoryBudgetError(
            "this update cannot fit beside vLLM: "
            + budget.explain()
            + ". Lower micro_batch_tokens, turn gradient checkpointing on, lower "
            "VLLM_GPU_MEMORY_UTILIZATION, or train on a GPU of its own (TRAIN_GPUS)."
        )
    return budget


def gpu_budget(
    base_model_dir: str | Path,
    config: UpdateConfig,
    device: torch.device,
    *,
    longest_sequence: int = 0,
    env: Mapping[str, str] | None = None,
) -> MemoryBudget | None:
    """Check the update's budget on its GPU before the model is loaded; None on the CPU.

    The GPU's size is the device's; vLLM's share comes from the settings (see
    ``vllm_share_of_training_gpu``), and what the driver reports free lowers it further when
    something else already holds memory. Raises ``MemoryBudgetError`` when it cannot fit.
    """
    if device.type != "cuda":
        return None
    env = os.environ if env is None else env
    shape = ModelShape.from_config(AutoConfig.from_pretrained(str(base_model_dir)))
    dtype = resolve_base_dtype(config, device)
    total = torch.cuda.get_device_properties(device).total_memory
    share = vllm_share_of_training_gpu(env)
    free, _ = torch.cuda.mem_get_info(device)
    usable = free + torch.cuda.memory_reserved(device)
    # Memory something else (vLLM, another worker) already holds counts against us too.
    share = max(share, 1.0 - usable / total)
    budget = memory_budget(
        shape,
        dtype_bytes=torch.tensor([], dtype=dtype).element_size(),
        lora_rank=config.lora_rank,
        target_modules=config.target_modules,
        micro_batch_tokens=max(config.micro_batch_tokens, longest_sequence),
        gradient_checkpointing=uses_gradient_checkpointing(config, device),
        gpu_gib=total / GIB,
        vllm_share=share,
        anchor_tokens=anchor_token_count(config, base_model_dir),
    )
    return check_budget(budget)


def anchor_token_count(config: UpdateConfig, base_model_dir: str | Path | None) -> int:
    """The anchor paragraphs' length in the model's tokens (an estimate without a model), or 0."""
    if config.anchor_coef <= 0:
        return 0
    if base_model_dir is None:
        return ANCHOR_TOKENS_ESTIMATE
    return sum(len(ids) for ids in anchor_token_ids(str(base_model_dir)))


def budget_table(gpu_gib: float = 80, vllm_shares: Sequence[float] = (0.85, 0.6)) -> str:
    """docs/production.md's table: each model size's budget on one GPU shared with vLLM (Markdown).

    The defaults of ``UpdateConfig`` (rank 16 on q/k/v/o, 4096-token micro-batches), bf16
    weights, gradient checkpointing on and off; a test keeps that page's copy equal to this.
    """
    config = UpdateConfig()
    rows = [
        "| model | params | checkpointing | weights | activations / token | need | "
        + " | ".join(f"left beside vLLM at {share}" for share in vllm_shares)
        + " |",
        "|" + " --- |" * (6 + len(vllm_shares)),
    ]
    for name, shape in SHAPES.items():
        for checkpointing in (True, False):
            budgets = [
                memory_budget(
                    shape,
                    dtype_bytes=2,
                    lora_rank=config.lora_rank,
                    target_modules=config.target_modules,
                    micro_batch_tokens=config.micro_batch_tokens,
                    gradient_checkpointing=checkpointing,
                    gpu_gib=gpu_gib,
                    vllm_share=share,
                    anchor_tokens=anchor_token_count(config, None),
                )
                for share in vllm_shares
            ]
            b = budgets[0]
            cells = [
                f"{b.available_gib:.0f} GiB: {'fits' if b.fits else '**refused**'}" for b in budgets
            ]
            rows.append(
                f"| {name} | {shape.parameters / 1e9:.2f} B | {'on' if checkpointing else 'off'} "
                f"| {b.weights_gib:.1f} GiB | {b.activations_mib_per_token:.2f} MiB "
                f"| {b.need_gib:.1f} GiB | " + " | ".join(cells) + " |"
            )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainer.gpu_memory [--model DIR]``: print the default update's budget on this
    host's training GPU; exit 1 when it cannot fit, 2 when the device setting cannot be met."""
    import argparse

    from trainer.policy import TrainDeviceError, pick_device

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--model", default=os.environ.get("PARLEY_BASE_MODEL", ""))
    args = parser.parse_args(argv)
    try:
        device = pick_device()
    except TrainDeviceError as exc:
        print(f"trainer.gpu_memory: error: {exc}", file=sys.stderr)
        return 2
    if device.type != "cuda":
        print(f"training memory budget: training on the {device.type}, no GPU budget to check")
        return 0
    try:
        budget = gpu_budget(args.model, UpdateConfig(), device)
    except MemoryBudgetError as exc:
        print(f"trainer.gpu_memory: error: {exc}", file=sys.stderr)
        return 1
    assert budget is not None
    print(f"training memory budget: {budget.explain()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
