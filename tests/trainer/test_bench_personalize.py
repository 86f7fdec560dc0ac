"""bench.personalize (the live personalization benchmark) without its 15-minute live loop:
it records its figures before it draws, so it runs from the `make run` environment (no
matplotlib) too, and it reports the control user beside the learner."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import bench.personalize
from bench.live_learner import Run, VersionScore


def test_the_figures_are_recorded_without_matplotlib(monkeypatch, tmp_path: Path, capsys) -> None:
    calls: list[tuple[str, ...]] = []

    class System:
        def manage(self, *args: str) -> str:
            calls.append(args)
            return "pk-control\n"

    @contextlib.contextmanager
    def running_system(env):
        yield System()

    def simulate(system, preference, prompts, **kwargs):
        assert kwargs["control_key"] == "pk-control"
        run = Run(preference=preference.name, algorithm="combined", feedback="corrections")
        run.versions = [
            VersionScore(0, 0, 0.0, 1.0, 0.0, 0.0, 0.0),
            VersionScore(3, 8, 0.75, 1.02, 60.0, 0.75, 0.0),
        ]
        return run

    recorded: list[dict] = []
    monkeypatch.setattr(bench.personalize, "running_system", running_system)
    monkeypatch.setattr(bench.personalize, "simulate", simulate)
    monkeypatch.setattr(bench.personalize, "record", lambda name, f: recorded.append(f))
    data = bench.personalize.ROOT / "bench" / "data"
    monkeypatch.setattr(bench.personalize, "ROOT", tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as in the `make run` environment
    files = [
        "--preference",
        str(data / "preferences.json"),
        "--prompts",
        str(data / "prompts.json"),
    ]
    assert bench.personalize.main(["--versions", "1", *files]) == 0
    assert calls == [("create_api_key", "--user", "control", "--create-user")]
    [figures] = recorded
    assert figures["versions"][1]["control_via_api"] == 0.0
    assert figures["versions"][1]["own_via_api"] == 0.75
    written = json.loads(next((tmp_path / "bench" / "results").glob("*.json")).read_text())
    assert written["versions"] == figures["versions"]
    out = capsys.readouterr().out
    assert "no plot drawn" in out and "control" in out
