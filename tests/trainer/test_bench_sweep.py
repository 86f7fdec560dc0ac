"""bench.sweep: grids of replay runs, how a row is named, and the table collected from runs."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import bench.common
import bench.replay
import bench.replay_figures
import bench.replay_options
import bench.sweep
import trainer.config
from tests.trainer.replay_helpers import TINY


def test_sweep_writes_its_table_with_the_mode(
    tiny_model_dir: Path, tmp_path: Path, events, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY]
    argv += ["--versions", "1", "--eval-splits", "held_out_other", "--label", "t"]
    argv += ["--feedback", "thumbs", "--grid", "batch_size=1,2", "--report-at", "1"]
    assert bench.sweep.main(argv) == 0
    assert [name for name, _ in events] == ["replay", "replay", "replay_sweep"]
    table = (tmp_path / "sweep-t.md").read_text()
    assert "Mode: replay" in table and table.count("| replay | batch_size=") == 2
    assert "held_out_other@1" in table and "judge right/parsed/votes" in table
    assert "worst witness ppl×" in table
    runs = sorted(str(p) for p in tmp_path.glob("replay-*.json"))
    again = ["--collect", *runs, "--eval-splits", "held_out_other", "--report-at", "1"]
    assert bench.sweep.main([*again, "--out-dir", str(tmp_path), "--label", "c"]) == 0
    collected = (tmp_path / "sweep-c.md").read_text()
    assert collected.count("| replay | batch_size=") == 2 and "| 1 |" in collected


def test_a_parallel_sweep_runs_each_cell_in_its_own_process(
    tiny_model_dir: Path, tmp_path: Path, events, monkeypatch
) -> None:
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("PARLEY_BENCH_RESULTS", str(results))  # the workers' record lines
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY, "--no-plot"]
    argv += ["--versions", "1", "--eval-splits", "held_out", "--label", "p", "--jobs", "2"]
    argv += ["--grid", "max_degenerate_extra=0,3", "--report-at", "1"]
    assert bench.sweep.main(argv) == 0
    runs = sorted(tmp_path.glob("replay-*.json"))
    assert ["-degenerate3-" in p.name for p in runs].count(True) == 1 == len(runs) - 1
    assert [json.loads(p.read_text())["gate"]["max_degenerate_extra"] for p in runs] in (
        [0, 3],
        [3, 0],
    )
    assert len(results.read_text().splitlines()) == 2  # one line per run, from the workers
    assert not list((tmp_path / "partial").glob("*.json"))  # finished runs leave no partial
    table = (tmp_path / "sweep-p.md").read_text()
    assert "| replay | max_degenerate_extra=0 |" in table
    assert "| replay | max_degenerate_extra=3 |" in table


def test_answers_of_another_length_are_named_in_the_file_and_the_table(tmp_path: Path) -> None:
    """A run at longer answers (e.g. "ends with a question", which needs answers that end) is
    not mistaken for one at the defaults."""
    figures = {
        "preference": "ends-with-question",
        "second_preference": None,
        "feedback": "corrections",
        "algorithm": "combined",
        "seed": 0,
        "batch_size": bench.replay_options.BATCH_SIZE,
        "overrides": {},
        "gen_tokens": 128,
        "eval_tokens": 128,
        "gate": {"holdout": bench.replay_options.GATE_HOLDOUT_SAMPLES, "fresh": 2},
        "scoring": bench.replay_figures.SCORING,
    }
    path = bench.replay.write_figures(figures, tmp_path, record_line=False)
    assert path.name == "replay-ends-with-question-corrections-combined-s0-gen128-eval128.json"
    assert bench.sweep.run_label(figures) == "gen_tokens=128, eval_tokens=128"
    default = {**figures, "gen_tokens": 48, "eval_tokens": 48}
    assert bench.sweep.run_label(default) == "defaults"
    assert bench.replay.write_figures(default, tmp_path, record_line=False).name == (
        "replay-ends-with-question-corrections-combined-s0.json"
    )


def test_a_tighter_perplexity_gate_is_a_grid_setting_named_in_the_file_and_the_table(
    tmp_path: Path,
) -> None:
    assert bench.sweep.parse_grid(["gate_max_ppl_ratio=1.1,1.15"]) == [
        {"gate_max_ppl_ratio": 1.1},
        {"gate_max_ppl_ratio": 1.15},
    ]
    figures = {
        "preference": "all-lowercase",
        "second_preference": None,
        "feedback": "corrections",
        "algorithm": "combined",
        "seed": 2,
        "batch_size": bench.replay_options.BATCH_SIZE,
        "overrides": {},
        "gate": {"max_kl": 0.5, "max_ppl_ratio": 1.1, "max_degenerate_extra": 1, "holdout": 8}
        | {"fresh": bench.replay_options.GATE_FRESH_SAMPLES},
        "scoring": bench.replay_figures.SCORING,
    }
    path = bench.replay.write_figures(figures, tmp_path, record_line=False)
    assert path.name == "replay-all-lowercase-corrections-combined-s2-gateppl1.1.json"
    assert bench.sweep.run_label(figures) == "gate_max_ppl_ratio=1.1"
    at_default = {**figures, "gate": {**figures["gate"], "max_ppl_ratio": 1.15}}
    assert bench.sweep.run_label(at_default) == "defaults"


def test_runs_scored_before_loops_counted_as_misses_never_share_a_row() -> None:
    versions = [
        {"version": 0, "published": True, "ppl_ratio": 1.0, "scores": {"p": {"held_out": 0.0}}},
        {"version": 1, "published": True, "ppl_ratio": 1.0, "scores": {"p": {"held_out": 1.0}}},
    ]
    old = {"preference": "p", "feedback": "corrections", "algorithm": "combined", "seed": 0}
    old |= {"gate": {"holdout": bench.replay_options.GATE_HOLDOUT_SAMPLES, "fresh": 2}}
    old |= {"overrides": {}, "versions": versions, "judge": {"right": 0, "parsed": 0, "votes": 0}}
    old |= {"summary": bench.replay_figures.summarise(versions, "p"), "seconds_per_version": 1.0}
    flawed = [{**v, "flawed": {"held_out": 0.25 * v["version"]}} for v in versions]
    new = {**old, "scoring": bench.replay_figures.SCORING, "versions": flawed}
    assert bench.sweep.run_label(old) == "defaults (loops counted)"
    assert bench.sweep.run_label(new) == "defaults"
    # an older sweep stored its label without the mark: it gets it, once
    stored = {**old, "settings_label": "lr=0.001"}
    assert bench.sweep.run_label(stored) == "lr=0.001 (loops counted)"
    assert bench.sweep.run_label({**stored, "settings_label": "lr=0.001 (loops counted)"}) == (
        "lr=0.001 (loops counted)"
    )
    for run in (old, new):
        run["settings_label"] = bench.sweep.run_label(run)
    rows = bench.sweep.collect([old, new], ["held_out"], [1])
    assert [r["settings"] for r in rows] == ["defaults", "defaults (loops counted)"]
    table = bench.sweep.markdown(rows, ["held_out@1", "worst broken", "excluded"])
    assert table.splitlines()[-1].endswith("| 1.00 | — | — |")  # neither measured then
    with_policy = {**new, "refusal_policy": {"max_refusals": 3}}
    new_row = bench.sweep.collect([with_policy], ["held_out"], [1])
    table = bench.sweep.markdown(new_row, ["held_out@1", "worst broken", "excluded"])
    assert table.splitlines()[-1].endswith("| 1.00 | 0.25 | 0 |")


def test_collecting_skips_the_sweeps_own_tables(tmp_path: Path) -> None:
    (tmp_path / "sweep-x.json").write_text(json.dumps([{"mode": "replay"}]))
    assert bench.sweep.load_runs([tmp_path / "sweep-x.json"]) == []


def test_a_table_says_when_only_some_seeds_reached_a_version() -> None:
    """Runs a deadline stopped at different versions: the v8 cell is the mean of those that got
    there, and says how many of the seeds that is."""
    row = {
        "mode": "replay",
        "settings": "defaults",
        "algorithm": "opd",
        "feedback": "corrections",
        "preference": "starts-with-sure",
        "seeds": [0, 1, 2],
        "held_out@4": [1.0, 0.92, 1.0],
        "held_out@8": [1.0],
    }
    table = bench.sweep.markdown([row], ["held_out@4", "held_out@8", "held_out@16"])
    assert table.splitlines()[-1].endswith("| 0.97 ± 0.04 | 1.00 (1/3) | — |")


def test_runs_recorded_before_the_witness_show_a_dash() -> None:
    versions = [
        {"version": 0, "published": True, "ppl_ratio": 1.0, "scores": {"p": {"held_out": 0.0}}},
        {"version": 1, "published": True, "ppl_ratio": 1.1, "scores": {"p": {"held_out": 1.0}}},
    ]
    assert bench.replay_figures.summarise(versions, "p")["worst_witness_ppl_ratio"] is None
    row = {"mode": "replay", "settings": "defaults", "algorithm": "combined"}
    row |= {"feedback": "corrections", "preference": "p", "seeds": [0]}
    row |= {"worst ppl×": [1.1], "worst witness ppl×": []}
    table = bench.sweep.markdown([row], ["worst ppl×", "worst witness ppl×"])
    assert table.splitlines()[-1].endswith("| 1.100 | — |")


def test_runs_whose_gate_held_nothing_back_never_share_a_row_with_those_that_did(
    tmp_path: Path,
) -> None:
    """A run whose gate saw no held-back feedback is labelled holdout=0, computed or stored,
    and a new run with --holdout 0 is named so in its file too."""
    figures = {"preference": "p", "feedback": "corrections", "algorithm": "rl", "seed": 1}
    figures |= {"overrides": {}, "scoring": bench.replay_figures.SCORING, "second_preference": None}
    figures |= {"batch_size": bench.replay_options.BATCH_SIZE, "gate": {"max_kl": 0.5}}
    assert bench.sweep.run_label(figures) == "holdout=0"
    assert bench.sweep.run_label({**figures, "settings_label": "lr=0.001"}) == "lr=0.001, holdout=0"
    old_scoring = {**figures, "scoring": None, "settings_label": "defaults (loops counted)"}
    assert bench.sweep.run_label(old_scoring) == "holdout=0 (loops counted)"
    held = {**figures, "gate": {"max_kl": 0.5, "holdout": 8, "fresh": 2}}
    assert bench.sweep.run_label(held) == "defaults"
    # held back, without leaving the newest samples for the next update
    no_fresh = {**figures, "gate": {"max_kl": 0.5, "holdout": 8}}
    assert bench.sweep.run_label(no_fresh) == "fresh=0"
    assert bench.sweep.run_label({**no_fresh, "settings_label": "defaults"}) == "fresh=0"
    assert bench.replay.write_figures(no_fresh, tmp_path, record_line=False).name == (
        "replay-p-corrections-rl-s1-fresh0.json"
    )
    first_rule = {**figures, "gate": {"holdout": 8, "holdout_live_batch": True, "fresh": 2}}
    assert bench.sweep.run_label(first_rule) == "holdout incl. live batch"
    none = {**figures, "gate": {"max_kl": 0.5, "holdout": 0}}
    assert bench.sweep.run_label(none) == "holdout=0"
    # a sweep run with --holdout 0 on its command line stores its grid label, "defaults"
    assert bench.sweep.run_label({**none, "settings_label": "defaults"}) == "holdout=0"
    path = bench.replay.write_figures(none, tmp_path, record_line=False)
    assert path.name == "replay-p-corrections-rl-s1-holdout0.json"


def test_a_row_is_named_by_what_differs_from_todays_defaults_not_those_of_its_day() -> None:
    """A run recorded when batch_baseline was off by default says so; a run that set it on
    when it was not yet the default is a defaults run now; how a run computed is never named."""
    config = dataclasses.asdict(trainer.config.UpdateConfig())
    base = {"preference": "p", "feedback": "corrections", "algorithm": "combined", "seed": 0}
    base |= {"gate": {"holdout": bench.replay_options.GATE_HOLDOUT_SAMPLES, "fresh": 2}}
    base |= {"batch_size": bench.replay_options.BATCH_SIZE, "scoring": bench.replay_figures.SCORING}
    then_default = {**base, "overrides": {}, "config": {**config, "batch_baseline": False}}
    assert bench.sweep.run_label(then_default) == "batch_baseline=False"
    set_then = {**base, "overrides": {"batch_baseline": True}, "config": config}
    assert bench.sweep.run_label(set_then) == "defaults"
    on_a_gpu = {**config, "base_dtype": "float32", "gradient_checkpointing": False, "seed": 2}
    assert bench.sweep.run_label({**base, "overrides": {}, "config": on_a_gpu}) == "defaults"
    # a run that recorded no config: its overrides that differ
    no_config = {**base, "overrides": {"lr": 3e-4, "batch_baseline": True}}
    assert bench.sweep.run_label(no_config) == "lr=0.0003"
