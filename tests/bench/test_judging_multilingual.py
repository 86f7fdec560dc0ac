"""The multilingual next-state set is shaped as documented, and bench.judging scores any set of
that shape per language, per split and per kind."""

from __future__ import annotations

import json
import sys
from collections import Counter
from itertools import groupby

import bench.judging
from bench.common import ROOT

MULTILINGUAL = ROOT / "bench" / "data" / "next_states_multilingual.json"


def _cases() -> list[dict]:
    return json.loads(MULTILINGUAL.read_text())["cases"]


def test_the_multilingual_set_has_enough_cases_in_each_of_three_languages() -> None:
    cases = _cases()
    by_language = Counter(c["language"] for c in cases)
    assert len(cases) >= 90
    assert all(by_language[lang] >= 25 for lang in ("en", "de", "zh"))
    assert len({c["id"] for c in cases}) == len(cases)


def test_every_case_names_a_documented_kind_and_a_label_in_minus_one_zero_one() -> None:
    data = json.loads(MULTILINGUAL.read_text())
    for case in data["cases"]:
        assert case["kind"] in data["kinds"], case["id"]
        assert case["label"] in (-1, 0, 1), case["id"]
        assert {"request", "answer", "next_state", "language"} <= set(case), case["id"]
        assert case["next_state"].startswith(("[user] ", "[tool result")), case["id"]


def test_the_split_is_every_other_case_within_a_language() -> None:
    cases = _cases()
    for _language, group in groupby(cases, key=lambda c: c["language"]):
        splits = [c["split"] for c in group]
        assert splits == ["tune" if i % 2 == 0 else "heldout" for i in range(len(splits))]


def test_each_split_of_each_main_language_holds_all_three_labels() -> None:
    cases = _cases()
    for language in ("en", "de", "zh"):
        for split in ("tune", "heldout"):
            part = [c for c in cases if c["language"] == language and c["split"] == split]
            labels = {c["label"] for c in part}
            assert labels == {-1, 0, 1}, (language, split)


def test_tally_counts_right_and_total_per_group() -> None:
    cases = [{"language": "de"}, {"language": "de"}, {"language": "zh"}, {}]
    assert bench.judging.tally(cases, [True, False, True, True], "language") == {
        "-": {"right": 1, "cases": 1},
        "de": {"right": 1, "cases": 2},
        "zh": {"right": 1, "cases": 1},
    }


def test_the_table_has_a_row_per_language_and_a_column_per_split() -> None:
    cases = [
        {"language": "de", "split": "tune"},
        {"language": "de", "split": "heldout"},
        {"language": "zh", "split": "heldout"},
    ]
    table = bench.judging.accuracy_table(cases, [True, False, True], "language").splitlines()
    assert table[0].split() == ["language", "tune", "heldout", "all"]
    assert table[1].split()[0] == "de" and "1/1" in table[1] and "0/1" in table[1]
    assert table[-1].split()[0] == "all" and "2/3" in table[-1]


def test_cases_flag_scores_the_given_file_and_records_per_language(monkeypatch, capsys) -> None:
    recorded: dict = {}
    monkeypatch.setattr(bench.judging, "record", lambda name, figures: recorded.update(figures))
    monkeypatch.setattr(bench.judging, "plot_accuracy", lambda *args: None)
    argv = ["bench.judging", "--cases", str(MULTILINGUAL), "--judges", "cues", "--split", "all"]
    monkeypatch.setattr(sys, "argv", argv)
    bench.judging.main()
    cues = recorded["judges"]["cues"]
    assert recorded["data"] == "bench/data/next_states_multilingual.json"
    assert cues["cases"] == len(_cases())
    assert {"en", "de", "zh"} <= set(cues["by_language"])
    assert set(cues["by_split"]) == {"tune", "heldout"}
    out = capsys.readouterr().out
    assert "language" in out and "heldout" in out
