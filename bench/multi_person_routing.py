"""Three ways to send each row of a batch through its own person's LoRA adapter, timed.

One forward and backward pass (``trainer.policy.token_logprobs``, the scoring an update step
runs) over every person's rows at once, K adapters on one base model, three routings:

- gather: ``trainer.stacked_lora`` (what the trainer uses): each row's A and B gathered out
  of the stacked weights, two batched matmuls (``torch.bmm``) for the whole batch;
- runs: one matmul pair per run of consecutive rows of one person (the trainer's fallback for
  people of different ranks);
- peft: peft's mixed-batch forward (``adapter_names``), which indexes each adapter's rows out of
  the batch and adds its output back; peft refuses it in training mode, so it runs in eval mode
  (the same arithmetic without dropout).

The passes are interleaved and repeated; the median of each is reported (``--routing`` of
``bench.multi_person_step``).
"""

from __future__ import annotations

import statistics
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from peft import get_peft_model
from torch import Tensor
from transformers import AutoModelForCausalLM

from trainer.batch import Sample, collate
from trainer.config import UpdateConfig
from trainer.policy import lora_config, token_logprobs
from trainer.stacked_lora import StackedPolicy, new_person_lora


def routing_figures(
    model_dir: Path, batches: list[list[Sample]], device: torch.device, repeats: int = 3
) -> dict[str, Any]:
    """Median seconds of one forward and backward pass per routing, and the pass's shape."""
    samples = [s for batch in batches for s in batch]
    persons = [k for k, batch in enumerate(batches) for _ in batch]
    batch = collate(
        [s.prompt_token_ids for s in samples], [s.response_token_ids for s in samples]
    ).to(device)
    passes = {
        "gather": _gather_pass(model_dir, len(batches), persons, device),
        "runs": _runs_pass(model_dir, len(batches), persons, device),
        "peft": _peft_pass(model_dir, len(batches), persons, device),
    }
    seconds: dict[str, list[float]] = {name: [] for name in passes}
    for repeat in range(repeats + 1):
        for name, one_pass in passes.items():
            started = time.perf_counter()
            one_pass(batch.input_ids_B_T, batch.attention_mask_B_T, batch.target_mask_B_T)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if repeat:  # the first round warms up
                seconds[name].append(time.perf_counter() - started)
    figures = {f"{name}_seconds": statistics.median(s) for name, s in seconds.items()}
    print(
        f"multi_person_step | one pass over {len(samples)} rows × "
        f"{batch.input_ids_B_T.shape[1]} tokens, {len(batches)} adapters: "
        + ", ".join(f"{name} {figures[f'{name}_seconds']:.2f} s" for name in passes),
        flush=True,
    )
    return {"rows": len(samples), "width": int(batch.input_ids_B_T.shape[1]), **figures}


Pass = Callable[[Tensor, Tensor, Tensor], None]


def _base(model_dir: Path, device: torch.device) -> Any:
    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    base.config.use_cache = False
    return base.to(device)


def _stacked(model_dir: Path, people: int, device: torch.device) -> StackedPolicy:
    base = _base(model_dir, device)
    loras = [new_person_lora(base, UpdateConfig(seed=k)) for k in range(people)]
    return StackedPolicy(base, loras).train()


def _backward(model: torch.nn.Module, ids: Tensor, mask: Tensor, target: Tensor) -> None:
    token_logprobs(model, ids, mask, target).sum().backward()
    model.zero_grad(set_to_none=True)


def _gather_pass(model_dir: Path, people: int, persons: list[int], device: torch.device) -> Pass:
    model = _stacked(model_dir, people, device)

    def one_pass(ids: Tensor, mask: Tensor, target: Tensor) -> None:
        with model.rows(persons):
            _backward(model, ids, mask, target)

    return one_pass


def _runs_pass(model_dir: Path, people: int, persons: list[int], device: torch.device) -> Pass:
    model = _stacked(model_dir, people, device)

    def by_runs(layer: Any, x: Tensor) -> Tensor:
        result = layer.base_layer(x)
        runs = layer.router.runs()
        deltas = [layer._delta(person, x[start:stop]) for person, start, stop in runs]
        return (result + torch.cat(deltas)).to(result.dtype)

    for module in model.modules():
        if hasattr(module, "lora_A") and hasattr(module, "router"):
            module.forward = types.MethodType(by_runs, module)

    def one_pass(ids: Tensor, mask: Tensor, target: Tensor) -> None:
        with model.rows(persons):
            _backward(model, ids, mask, target)

    return one_pass


def _peft_pass(model_dir: Path, people: int, persons: list[int], device: torch.device) -> Pass:
    config = lora_config(UpdateConfig())
    model = get_peft_model(_base(model_dir, device), config, adapter_name="p0")
    for k in range(1, people):
        model.add_adapter(f"p{k}", lora_config(UpdateConfig()))
    for name, param in model.named_parameters():
        param.requires_grad_("lora_" in name)
    names = [f"p{k}" for k in persons]
    model.eval()

    def one_pass(ids: Tensor, mask: Tensor, target: Tensor) -> None:
        with model.base_model._enable_peft_forward_hooks(adapter_names=names):
            _backward(model, ids, mask, target)

    return one_pass
