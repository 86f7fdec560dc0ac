"""The feedback × preference table from replay runs as the replay writes them, bad data
included: refused versions, unparsed and wrong votes, a version without a perplexity, a run
stopped early, runs at other settings left out."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import bench.feedback_table
from bench.feedback_table import main
from bench.replay_figures import SCORING


def _run(name: str, feedback: str, seed: int, scores: list[float], **extra) -> dict:
    versions = [{"version": 0, "scores": {name: {"held_out": scores[0]}}}]
    for number, score in enumerate(scores[1:], start=1):
        versions.append(
            {
                "version": number,
                "ppl_ratio": None if number == 2 else 1.0 + number / 100,
                "scores": {name: {"held_out": score}},
            }
        )
    return {
        "mode": "replay",
        "preference": name,
        "second_preference": None,
        "feedback": feedback,
        "algorithm": "combined",
        "seed": seed,
        "config": {},
        "overrides": {},
        "gate": {"holdout": 8, "fresh": 2},
        "scoring": SCORING,
        "judge": {"votes": 4, "parsed": 3, "right": 2, "neutral": 1},
        "summary": {"refused": [2] if seed == 1 else []},
        "versions": versions,
        **extra,
    }


def _write(folder: Path, runs: list[dict]) -> None:
    for index, run in enumerate(runs):
        (folder / f"replay-{index}.json").write_text(json.dumps(run))


def test_the_doctests_hold() -> None:
    assert doctest.testmod(bench.feedback_table).failed == 0


def test_a_cell_per_feedback_and_preference_with_what_went_wrong(tmp_path, capsys) -> None:
    _write(
        tmp_path,
        [
            _run("call-me-sam", "followups", 0, [0.0, 0.5, 0.75]),
            _run("call-me-sam", "followups", 1, [0.0, 0.25, 1.0]),
            _run("call-me-sam", "followups", 2, [0.0, 1.0]),  # stopped after v1
            _run("call-me-sam", "followups", 0, [0.0, 0.0, 0.0], language="de"),
            _run("starts-with-sure", "thumbs", 0, [0.0, 0.0, 0.0]),
            # another algorithm, another setting: not at the defaults
            {**_run("starts-with-sure", "pairs", 0, [0.0, 1.0]), "algorithm": "rl"},
            _run("starts-with-sure", "pairs", 0, [0.0, 1.0], overrides={"lr": 0.1}),
        ],
    )
    out = tmp_path / "table.md"
    assert main(["--runs", str(tmp_path), "--at", "1", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.read_text() == text
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("| preference"))
    assert head == "| preference | base | thumbs | followups | followups/de |"
    sure = next(line for line in lines if line.startswith("| starts-with-sure (format)"))
    assert "0.00 / 0.00, peak 0.00@v0 (1s, 1.01×, 0r)" in sure and "not run" in sure
    sam = next(line for line in lines if line.startswith("| call-me-sam (content)"))
    # v1 over three seeds, v2 over the two that got there; v2's perplexity missing: v1's kept
    assert "0.58 ± 0.38 / 0.88 ± 0.12, peak 0.88@v2 (3s, 1.01×, 1r)" in sam
    assert "2 others left out" in text
    assert "- call-me-sam, followups: refused s1: v2; votes 12: 3 unparsed, 3 wrong;" in text
    assert "3 follow-ups were new questions" in text


def test_a_memory_run_is_its_own_column_scored_without_the_memory(tmp_path, capsys) -> None:
    served = _run("call-me-sam", "memory", 0, [0.5, 1.0, 1.0])  # as served: the prompt's doing
    for version, without in zip(served["versions"], [0.0, 0.25, 0.75], strict=True):
        version["score_without_memory"] = without
    _write(tmp_path, [_run("call-me-sam", "comments", 0, [0.0, 0.5, 0.5]), served])
    assert main(["--runs", str(tmp_path), "--at", "1", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| preference | base | comments | memory |" in lines
    sam = next(line for line in lines if line.startswith("| call-me-sam (content)"))
    assert sam.startswith("| call-me-sam (content) | 0.00 |")
    assert sam.endswith("| 0.25 / 0.75, peak 0.75@v2 (1s, 1.01×, 0r) |")
