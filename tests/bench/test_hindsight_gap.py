"""The hindsight gap benchmark on a tiny model: every case with the user's words is scored, a
tool result is left out, the figures are recorded before they are printed."""

from __future__ import annotations

import doctest
import json

import bench.hindsight_gap
from bench.hindsight_gap import main
from tests.trainer.tiny import build_tiny_model


def test_the_doctests_hold() -> None:
    assert doctest.testmod(bench.hindsight_gap).failed == 0


def test_it_scores_each_follow_up_and_records_by_label(tmp_path, monkeypatch, capsys) -> None:
    model = build_tiny_model(tmp_path / "model")
    cases = [
        {
            "request": "Distance?",
            "answer": "5 miles.",
            "next_state": "[user] in km please",
            "label": -1,
        },
        {"request": "Hi", "answer": "Hello!", "next_state": "[user] Danke!", "label": 1},
        {"request": "Hi", "answer": "Hello!", "next_state": "[user] 天气怎么样？", "label": 0},
        {"request": "Sum?", "answer": "Call add.", "next_state": "[tool result c1] 3", "label": 1},
    ]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": cases}))
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("PARLEY_BENCH_RESULTS", str(results))
    assert main(["--cases", str(path), "--model-dir", str(model)]) == 0
    recorded = json.loads(results.read_text())
    assert recorded["bench"] == "hindsight_gap"
    assert {label: f["cases"] for label, f in recorded["by_label"].items()} == {
        "-1": 1,
        "0": 1,
        "1": 1,
    }
    assert 0.0 <= recorded["separation"] <= 1.0
    assert "| -1 | 1 |" in capsys.readouterr().out
