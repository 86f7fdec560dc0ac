"""The probe gate measures only what can change its decision (trainer.probing.probe_model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from tests.trainer.probing_helpers import chat_sample
from trainer.config import UpdateConfig
from trainer.gate import gate_decision
from trainer.probes import PROBE_PROMPTS, PROBE_TEXT


def test_the_gate_generates_only_the_answers_its_decision_needs(
    prepared_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate refuses on the held-back prompts only where the candidate answers worse than
    both the live version and the base: without a bad answer of its own neither is asked; with
    one no worse than live's, the base is not; the base's probe figures, once measured, are
    taken as they are."""
    from trainer import probing
    from trainer.policy import load_policy, lora_snapshot

    tokenizer = AutoTokenizer.from_pretrained(str(prepared_model))
    model = load_policy(prepared_model, UpdateConfig(), init_adapter_dir=None, device="cpu")
    live = lora_snapshot(model)  # a fresh adapter: candidate and live answer alike
    held = [chat_sample(tokenizer, q, "Sure!") for q in ("What is snow?", "Name an animal.")]
    generated: list[int] = []
    real = probing._greedy_answers_to_ids

    def counting(model, tokenizer, prompt_ids, max_new_tokens):
        generated.append(len(prompt_ids))
        return real(model, tokenizer, prompt_ids, max_new_tokens)

    def probe(kinds: list[str], **more):
        generated.clear()
        monkeypatch.setattr(probing, "degenerate_kinds", lambda *a, **k: list(kinds))
        args = (model, tokenizer, PROBE_PROMPTS[:2], PROBE_TEXT)
        return probing.probe_model(*args, max_new_tokens=4, live_weights=live, holdout=held, **more)

    monkeypatch.setattr(probing, "_greedy_answers_to_ids", counting)
    clean, base = probe([])
    # candidate and base on the probe prompts, the candidate on the held-back ones
    assert generated == [2, 2, 2]
    assert "held_back_live_repeating" not in clean and "held_back_repeating" not in base
    assert gate_decision(clean, base, 100.0, 100.0)[0]
    looping, base_now = probe(["repeating"])
    # every answer loops, the live version's as much: live asked, the base not
    assert generated == [2, 2, 2, 2]
    assert looping["held_back_repeating"] == looping["held_back_live_repeating"] == 2
    assert "held_back_repeating" not in base_now
    assert gate_decision(looping, base_now, 100.0, 100.0, max_degenerate_extra=2)[0]
    again, cached = probe([], base_probe=base)
    assert generated == [2, 2]  # the base's probe answers are not generated again
    assert cached["probe_ppl"] == base["probe_ppl"] and again["probe_kl"] == clean["probe_kl"]
