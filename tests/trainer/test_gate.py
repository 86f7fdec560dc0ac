"""The probe gate: pure decisions, and probe figures measured on a tiny model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from trainer.batch import Sample
from trainer.config import UpdateConfig
from trainer.gate import gate_decision, probe_metrics
from trainer.probes import PROBE_PROMPTS, PROBE_TEXT
from trainer.update import run_update

BASE = {"probe_kl": 0.0, "probe_ppl": 20.0}


def test_a_candidate_within_both_limits_passes() -> None:
    assert gate_decision({"probe_kl": 0.05, "probe_ppl": 22.0}, BASE, 0.1, 1.2) == (True, [])


def test_too_much_kl_fails_and_says_so() -> None:
    passed, reasons = gate_decision({"probe_kl": 0.5, "probe_ppl": 20.0}, BASE, 0.1, 1.2)
    assert not passed
    assert len(reasons) == 1 and "KL" in reasons[0]


def test_perplexity_above_the_ratio_fails_and_says_so() -> None:
    passed, reasons = gate_decision({"probe_kl": 0.0, "probe_ppl": 24.1}, BASE, 0.1, 1.2)
    assert not passed
    assert len(reasons) == 1 and "perplexity" in reasons[0]


def test_both_failures_are_reported() -> None:
    passed, reasons = gate_decision({"probe_kl": 1.0, "probe_ppl": 99.0}, BASE, 0.1, 1.2)
    assert not passed and len(reasons) == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_figures_never_pass(bad: float) -> None:
    assert not gate_decision({"probe_kl": bad, "probe_ppl": 20.0}, BASE, 0.1, 1.2)[0]
    assert not gate_decision({"probe_kl": 0.0, "probe_ppl": bad}, BASE, 0.1, 1.2)[0]


def test_limits_are_inclusive() -> None:
    assert gate_decision({"probe_kl": 0.1, "probe_ppl": 24.0}, BASE, 0.1, 1.2)[0]


def test_the_default_probe_set_is_non_trivial() -> None:
    assert len(PROBE_PROMPTS) >= 3 and len(PROBE_TEXT.split()) >= 50


def test_probe_kl_is_zero_for_the_base_and_positive_after_training(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    prompt = list(range(10, 30))
    samples = [
        Sample(prompt, [40 + i, 50 + i, 60 + i], [-5.0, -5.0, -5.0], reward=r)
        for i, r in enumerate([1.0, -1.0, 1.0, -1.0])
    ]
    *_, summary = run_update(
        UpdateConfig(lr=5e-2, algorithm="rl"),
        samples,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "adapter",
    )
    prompts = PROBE_PROMPTS[:2]
    base = probe_metrics(tiny_model_dir, None, prompts, PROBE_TEXT, max_new_tokens=8)
    candidate = probe_metrics(
        tiny_model_dir, summary["adapter_dir"], prompts, PROBE_TEXT, max_new_tokens=8
    )
    assert base["probe_kl"] == 0.0 and base["probe_kl_tokens"] > 0
    assert candidate["probe_kl"] > 0.0
    # a random model over 300 tokens is close to uniform: perplexity near the vocabulary size
    assert 100 < base["probe_ppl"] < 1000
    assert candidate["probe_ppl"] != base["probe_ppl"]
    assert gate_decision(candidate, base, max_kl=1e9, max_ppl_ratio=1e9) == (True, [])
    assert not gate_decision(candidate, base, max_kl=0.0, max_ppl_ratio=1e9)[0]
