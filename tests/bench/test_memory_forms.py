"""bench.memory_forms on a tiny random model: every preference in every form, the figures
recorded before the table is printed; and the answers served with a memory in each form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.answering import generate
from bench.memory_forms import FORMS, NAMES, SHORT, format_table, main
from tests.trainer.tiny import build_tiny_model
from trainer.batch import chat_prompt_ids
from trainer.memory_prompt import MARKER, SYSTEM_HEADING


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


def test_the_short_run_fills_a_row_per_preference_and_a_column_per_form(
    tiny_model: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("PARLEY_BENCH_RESULTS", str(results))
    assert main(["--model-dir", str(tiny_model), "--short", "--quiet"]) == 0
    recorded = json.loads(results.read_text())
    assert recorded["bench"] == "memory_forms" and recorded["forms"] == list(FORMS)
    assert (recorded["prompts"], recorded["samples"], recorded["seeds"]) == (2, 1, [0])
    table = recorded["table"]
    assert list(table) == list(NAMES)
    for forms in table.values():
        assert list(forms) == ["none", "appended", "system", "both"]
        for cell in forms.values():
            assert len(cell["sampled_by_seed"]) == len(SHORT.seeds)
            assert 0.0 <= cell["sampled"] <= 1.0 and 0.0 <= cell["greedy"] <= 1.0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(printed) == 2 + len(NAMES)  # header, rule, a row per preference
    assert all(line.count("|") == len(FORMS) + 2 for line in printed)


def test_each_form_serves_the_memory_where_it_says(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    from bench.answering import load_serving_model

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    model = load_serving_model(tiny_model, None)
    asked = {"max_new_tokens": 2, "temperature": 0.0, "seed": 0}
    [plain] = generate(model, tokenizer, ["Hi"], **asked)
    assert plain.prompt_token_ids == chat_prompt_ids(tokenizer, [{"role": "user", "content": "Hi"}])
    served = {}
    for form in ("appended", "system", "both"):
        [answer] = generate(model, tokenizer, ["Hi"], memories=["Call me Sam"], form=form, **asked)
        assert answer.prompt == "Hi"  # the user's text; the served prompt is in the ids
        served[form] = tokenizer.decode(answer.prompt_token_ids)
    assert MARKER + "Call me Sam." in served["appended"]
    assert SYSTEM_HEADING in served["system"] and MARKER not in served["system"]
    assert MARKER in served["both"] and SYSTEM_HEADING in served["both"]


def test_the_table_reads_sampled_spread_and_greedy() -> None:
    cell = {"sampled_by_seed": [0.25, 0.75], "greedy": 1.0}
    text = format_table({"call-me-sam": dict.fromkeys(FORMS, cell)})
    header, rule, row = text.splitlines()
    assert header == "| preference | none | appended | system | both |"
    assert rule == "|---|---|---|---|---|"
    assert row.startswith("| call-me-sam | 0.50 ± 0.25 (1.00) |")
