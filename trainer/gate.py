"""The probe gate: is a candidate adapter still close enough to the base model to publish?

Two pure halves, kept apart so the criteria can change without touching the measurement:

- ``probe_model`` measures a policy already in memory (the trainer's own, right after its
  update) on the probe set (see ``trainer.probes``): the candidate's figures with the adapter
  on, the base's with it off (``adapter_disabled``), so no second copy of the weights is ever
  loaded. ``probe_metrics`` is the same for a model folder and adapter on disk (one load).
- ``gate_decision`` compares a candidate's figures with the base's and says pass or fail.

KL is computed exactly over the vocabulary at each position of the candidate's own greedy
answers (teacher-forced), so it needs no sampling and is the same on every run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.batch import chat_prompt_ids
from trainer.policy import adapter_disabled, pick_device


@torch.no_grad()
def probe_model(
    model: torch.nn.Module,
    tokenizer: Any,
    probe_prompts: Sequence[str],
    probe_text: str,
    *,
    max_new_tokens: int = 24,
) -> tuple[dict[str, float], dict[str, float]]:
    """(candidate figures, base figures) of an in-memory policy; the base is its adapter off.

    Candidate: {"probe_kl": mean KL(policy ‖ base) per answer token, "probe_ppl": perplexity
    on the text, "probe_kl_tokens"}; base: the same with probe_kl 0. The model is left in eval
    mode; a caller that trains it again calls ``model.train()`` as the update does.
    """
    dev = next(model.parameters()).device
    model.eval()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    kl_sum, kl_tokens = 0.0, 0
    for prompt in probe_prompts:
        ids = chat_prompt_ids(tokenizer, [{"role": "user", "content": prompt}])
        prompt_1_P = torch.tensor([ids], device=dev)
        sequence_1_T = model.generate(
            input_ids=prompt_1_P,
            attention_mask=torch.ones_like(prompt_1_P),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=pad_id,
            use_cache=True,  # the trainer turns the cache off for training, not for generating
        )
        answer_positions = slice(len(ids) - 1, sequence_1_T.shape[1] - 1)
        if sequence_1_T.shape[1] == len(ids):
            continue
        policy_logp = F.log_softmax(model(sequence_1_T).logits[0, answer_positions].float(), -1)
        with adapter_disabled(model):
            base_logp = F.log_softmax(model(sequence_1_T).logits[0, answer_positions].float(), -1)
        kl_N = (policy_logp.exp() * (policy_logp - base_logp)).sum(-1)
        kl_sum += float(kl_N.sum())
        kl_tokens += kl_N.shape[0]
    text_1_T = torch.tensor(
        [tokenizer(probe_text, add_special_tokens=False)["input_ids"]], device=dev
    )
    candidate_ppl = _perplexity(model, text_1_T)
    with adapter_disabled(model):
        base_ppl = _perplexity(model, text_1_T)
    candidate = {
        "probe_kl": kl_sum / max(kl_tokens, 1),
        "probe_ppl": candidate_ppl,
        "probe_kl_tokens": float(kl_tokens),
    }
    base = {"probe_kl": 0.0, "probe_ppl": base_ppl, "probe_kl_tokens": float(kl_tokens)}
    return candidate, base


def _perplexity(model: torch.nn.Module, text_1_T: torch.Tensor) -> float:
    logits_T_V = model(text_1_T).logits[0, :-1].float()
    return math.exp(float(F.cross_entropy(logits_T_V, text_1_T[0, 1:])))


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

    Without an adapter the policy is the base, so probe_kl is 0 and probe_ppl is the baseline.
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


def gate_decision(
    metrics: dict[str, float],
    base_metrics: dict[str, float],
    max_kl: float,
    max_ppl_ratio: float,
) -> tuple[bool, list[str]]:
    """Pass when KL to base ≤ max_kl and ppl ≤ max_ppl_ratio · base ppl; reasons name each failure.

    >>> gate_decision({"probe_kl": 0.01, "probe_ppl": 11.0}, {"probe_ppl": 10.0}, 0.1, 1.2)
    (True, [])
    """
    reasons = []
    kl, ppl, base_ppl = metrics["probe_kl"], metrics["probe_ppl"], base_metrics["probe_ppl"]
    if not math.isfinite(kl) or kl > max_kl:
        reasons.append(f"probe KL to base {kl:.4g} exceeds {max_kl:.4g}")
    if not math.isfinite(ppl) or ppl > max_ppl_ratio * base_ppl:
        reasons.append(
            f"probe perplexity {ppl:.4g} exceeds {max_ppl_ratio:.3g} × base {base_ppl:.4g}"
        )
    return not reasons, reasons
