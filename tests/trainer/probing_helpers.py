"""Probe figures of a model folder and adapter on disk, and the judged chat samples the gate
tests score, for tests that start from files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.batch import Sample, chat_prompt_ids
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


def chat_sample(tokenizer: Any, question: str, correction: str) -> Sample:
    """A liked answer to ``question`` with ``correction`` as the answer wanted."""
    prompt = chat_prompt_ids(tokenizer, [{"role": "user", "content": question}])
    response = tokenizer("meh", add_special_tokens=False)["input_ids"]
    wanted = tokenizer(correction, add_special_tokens=False)["input_ids"]
    return Sample(
        prompt,
        response,
        [-5.0] * len(response),
        reward=1.0,
        correction_token_ids=[*wanted, tokenizer.eos_token_id],
    )
