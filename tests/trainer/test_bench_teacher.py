"""bench.teacher: the hinted teacher's answers against the plain ones, recorded then printed."""

from __future__ import annotations

from pathlib import Path

import pytest

import bench.teacher
from bench.common import ROOT
from trainer.batch import HINT_PREFIX


def test_the_teacher_sees_the_comment_as_the_trainer_puts_it() -> None:
    assert bench.teacher.hinted("Hi?", " Be brief. ") == f"Hi?{HINT_PREFIX}Be brief."


def test_compliance_is_recorded_per_preference_and_split(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, dict]] = []
    monkeypatch.setattr(bench.teacher, "record", lambda name, figures: seen.append((name, figures)))
    argv = ["--model-dir", str(tiny_model_dir), "--names", "starts-with-sure", "no-emoji"]
    assert bench.teacher.main([*argv, "--splits", "held_out", "--tokens", "4"]) == 0
    [(name, figures)] = seen
    assert name == "teacher" and figures["tokens"] == 4
    assert set(figures["results"]) == {"starts-with-sure", "no-emoji"}
    held_out = figures["results"]["no-emoji"]["held_out"]
    # the tiny random model's 4-token answers may loop or be blank, which meet no preference,
    # not even "no emoji"
    assert (
        held_out["prompts"] == 12 and 0 <= held_out["hinted"] <= 1 and 0 <= held_out["plain"] <= 1
    )
    assert "| starts-with-sure | 0.00 → " in capsys.readouterr().out


def test_an_unknown_preference_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.teacher.main(["--names", "shouting"])
    assert "no preference ['shouting']" in capsys.readouterr().err


def test_a_content_preference_is_asked_its_own_prompts_with_its_follow_ups_as_hints(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import doctest

    assert doctest.testmod(bench.teacher).failed == 0
    seen: list[tuple[str, dict]] = []
    monkeypatch.setattr(bench.teacher, "record", lambda name, figures: seen.append((name, figures)))
    argv = ["--model-dir", str(tiny_model_dir), "--names", "call-me-sam", "--tokens", "4"]
    assert bench.teacher.main([*argv, "--hint", "followups", "--language", "de"]) == 0
    [(_, figures)] = seen
    assert figures["hint"] == "followups" and figures["language"] == "de"
    # its own 16 train and 12 held-out prompts; it has no held_out_other split: left blank
    by_split = figures["results"]["call-me-sam"]
    assert {split: s["prompts"] for split, s in by_split.items()} == {"train": 16, "held_out": 12}
    assert capsys.readouterr().out.rstrip().endswith(" |  |")
    preferences = bench.teacher.load_preferences(ROOT / "bench" / "data" / "preferences.json")
    [sam] = [p for p in preferences if p.name == "call-me-sam"]
    hints = bench.teacher.hints_for(sam, 3, source="followups", language="zh")
    assert all(hint and "Sam" in hint for hint in hints)
