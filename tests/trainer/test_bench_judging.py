"""bench.judging --accuracy records its figures before it draws, and runs without matplotlib
(the `make run` environment)."""

from __future__ import annotations

import sys

import bench.judging


def test_the_accuracy_bench_records_before_it_plots_and_needs_no_matplotlib(
    monkeypatch, capsys
) -> None:
    events: list[str] = []
    recorded: dict = {}

    def record(name, figures):
        events.append("record")
        recorded.update(figures, name=name)

    monkeypatch.setattr(bench.judging, "record", record)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    monkeypatch.setattr(sys, "argv", ["bench.judging", "--accuracy", "--judges", "cues"])
    bench.judging.main()
    assert events == ["record"]
    assert "no plot drawn" in capsys.readouterr().out
    cues = recorded["judges"]["cues"]
    assert recorded["name"] == "judging_accuracy" and recorded["split"] == "heldout"
    assert cues["cases"] >= 30 and cues["parsed"] == cues["votes"] == cues["cases"]
    assert cues["accuracy"] >= 0.9


def test_the_labelled_next_states_are_varied_and_split() -> None:
    cases = bench.judging.load_cases("all")
    assert len(cases) >= 60
    for split in ("tune", "heldout"):
        part = [c for c in cases if c["split"] == split]
        assert len(part) >= 30
        assert {c["label"] for c in part} == {-1, 0, 1}
        assert {"correction", "complaint", "thanks", "neutral", "new_topic", "tool_ok"} <= {
            c["kind"] for c in part
        }
    assert len({c["id"] for c in cases}) == len(cases)
