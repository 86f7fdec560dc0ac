"""bench.lora_serving's pure parts: the distinct adapters it serves, and its ratio arithmetic.
The vLLM run itself is the benchmark (`python -m bench.lora_serving`), not a test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

from bench.lora_serving_figures import (
    BASE,
    REFERENCE,
    ColdLoad,
    Round,
    cold_load_figures,
    config_figures,
    ratios,
    stream_models,
    table,
)
from bench.lora_serving_setup import make_adapters
from trainer.config import UpdateConfig


def test_make_adapters_gives_n_distinct_adapters_that_peft_loads(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    folders = make_adapters(tiny_model_dir, tmp_path, 3)
    assert [f.name for f in folders] == ["user-00", "user-01", "user-02"]
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    with torch.no_grad():
        logits = [base(ids).logits]
        for folder in folders:
            config = json.loads((folder / "adapter_config.json").read_text())
            assert config["r"] == UpdateConfig().lora_rank
            assert set(config["target_modules"]) == set(UpdateConfig().target_modules)
            model = PeftModel.from_pretrained(base, str(folder))
            logits.append(model(ids).logits)
            base = model.unload()
    # Each adapter changes the output (a fresh peft adapter would not: B = 0), and differently.
    for i, a in enumerate(logits):
        for b in logits[i + 1 :]:
            assert not torch.allclose(a, b, atol=1e-4)


def rounds(*specs: tuple[list[float], int, float, float]) -> list[Round]:
    return [Round(ttfts_ms=t, tokens=n, wall_s=w, rss_mb=m) for t, n, w, m in specs]


def test_figures_and_ratios_against_the_one_adapter_case_pair_rounds() -> None:
    one = rounds(([100, 200, 300], 60, 2.0, 1000), ([200, 400, 600], 60, 4.0, 1010))
    many = rounds(([150, 300, 450], 60, 3.0, 1100), ([300, 600, 900], 60, 6.0, 1111))
    figures = config_figures(many)
    assert figures["ttft_p50_ms"] == 375  # over every stream of every round
    assert figures["ttft_p99_ms"] == 900
    assert figures["tokens_per_s"] == 15  # median of 20 and 10 tok/s
    assert figures["rss_mb"] == 1111  # the most seen
    r = ratios(many, one)
    # Each round is 1.5x slower than the one-adapter batch beside it, though the second round is
    # twice as slow as the first for both: the drift cancels out of the paired ratios.
    assert r["ttft_p50"] == pytest.approx(1.5)
    assert r["ttft_p99"] == pytest.approx(1.5)
    assert r["tokens_per_s"] == pytest.approx(2 / 3)
    assert r["rss"] == pytest.approx(1.1)
    assert ratios(one, one) == {"ttft_p50": 1, "ttft_p99": 1, "tokens_per_s": 1, "rss": 1}


def test_table_has_a_row_per_configuration_with_ratios_to_one_adapter() -> None:
    one = rounds(([100, 200], 40, 2.0, 1000))
    results = {BASE: rounds(([50, 100], 40, 1.0, 900)), REFERENCE: one}
    lines = table(results, streams=2).splitlines()
    assert len(lines) == 3
    assert lines[1].split()[-4:] == ["0.500", "0.500", "2.000", "0.900"]
    assert lines[2].split()[-4:] == ["1.000", "1.000", "1.000", "1.000"]


def test_cold_load_figures() -> None:
    loads = [ColdLoad(100, 300, 100, 8), ColdLoad(200, 400, 200, 10), ColdLoad(150, 500, 100, 9)]
    figures = cold_load_figures(loads)
    assert figures["load_ms_median"] == 150 and figures["load_ms_max"] == 200
    assert figures["cold_ttft_ms_median"] == 400 and figures["warm_ttft_ms_median"] == 100
    assert figures["cold_over_warm_ttft"] == 3  # median of 3, 2 and 5
    assert figures["rss_added_mb_median"] == 9


def test_streams_spread_evenly_over_the_configurations_adapters() -> None:
    assert stream_models(BASE, 3) == ["base"] * 3
    assert stream_models("1", 3) == ["user-00"] * 3
    assert stream_models("8", 32).count("user-07") == 4
    assert len(set(stream_models("32", 32))) == 32
