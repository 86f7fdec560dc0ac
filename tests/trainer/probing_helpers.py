"""Probe figures of a model folder and adapter on disk, for tests that start from files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.policy import pick_device
from trainer.probing import probe_model


def probe_metrics(
    model_dir: str | Path,
    adapter_dir: str | Path | None,
    probe_prompts: Sequence[str],
    probe_text: str,
    *,
    max_new_tokens: int = 24,
    device: str | torch.device | None = None,
) -> dict[str, float]:
    """``probe_model``'s candidate figures for a model folder and adapter on disk (one load).

    The live version is taken to be the base here, so probe_kl is the KL to the base; without
    an adapter the policy is the base, so probe_kl is 0 and probe_ppl is the baseline.
    """
    dev = pick_device(device)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).to(dev)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, str(adapter_dir)).to(dev)
    candidate, _ = probe_model(
        model, tokenizer, probe_prompts, probe_text, max_new_tokens=max_new_tokens
    )
    return candidate
