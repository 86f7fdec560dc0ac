"""bench.replay and bench.sweep on a tiny random model: two versions through the real trainer
and gate, the figures recorded before any plot, and no matplotlib needed (the `make run`
environment has none)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import bench.replay
import bench.sweep
import trainer.config
from bench.preferences import LOOP_COMMENT, Preference, answer_flaws, load_prompts
from bench.simulated_user import Answer, judged_sample, react
from tests.trainer.tiny import byte_tokenizer
from trainer.config import UpdateConfig

SURE = Preference.from_dict(
    {
        "name": "sure",
        "comment": "Please always start your answer with 'Sure!'",
        "rules": {"starts_with": "Sure!"},
        "fix": {"prepend": "Sure! "},
    }
)
TINY = ["--versions", "2", "--batch-size", "2", "--gen-tokens", "4", "--eval-tokens", "4"]
TINY += ["--eval-limit", "2", "--quiet"]


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict]]:
    seen: list[tuple[str, dict]] = []
    for module in (bench.replay, bench.sweep):
        monkeypatch.setattr(module, "record", lambda name, figures: seen.append((name, figures)))
    return seen


def test_replay_records_before_it_plots_and_runs_without_matplotlib(
    tiny_model_dir: Path, tmp_path: Path, events, monkeypatch, capsys
) -> None:
    threads = torch.get_num_threads()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY]
    assert bench.replay.main([*argv, "--feedback", "next_state"]) == 0
    assert "no plot drawn" in capsys.readouterr().out
    assert torch.get_num_threads() == threads  # one thread while it ran, then given back
    [(name, figures)] = events
    assert name == "replay" and figures["mode"] == "replay"
    assert figures["command"].startswith("python -m bench.replay")
    assert [v["version"] for v in figures["versions"]] == [0, 1, 2]
    assert figures["turns"] == 4 and figures["eval_prompts"] == {
        "held_out": 2,
        "held_out_other": 2,
    }
    # next-state only: the cue judge read every next message, and every vote parsed
    assert figures["judge"]["votes"] == 4 == figures["judge"]["parsed"]
    assert figures["config"]["lr"] == UpdateConfig().lr and not figures["overrides"]  # defaults
    for version in figures["versions"][1:]:
        assert version["ppl_ratio"] > 0 and isinstance(version["published"], bool)
        assert version["witness_ppl_ratio"] > 0  # text neither the gate nor the anchor sees
    assert figures["versions"][0]["witness_ppl_ratio"] == 1.0
    worst = max(v["witness_ppl_ratio"] for v in figures["versions"])
    assert figures["summary"]["worst_witness_ppl_ratio"] == worst
    written = json.loads(next(tmp_path.glob("replay-*.json")).read_text())
    assert written["versions"] == figures["versions"]
    assert not list(tmp_path.glob("*.png"))
    assert not list((tmp_path / "partial").glob("*.json"))  # the curve so far, gone once written


def test_replay_draws_only_after_the_figures_are_written(
    tiny_model_dir: Path, tmp_path: Path, events, monkeypatch
) -> None:
    order: list[str] = []
    monkeypatch.setattr(
        bench.replay, "write_figures", _spy(bench.replay.write_figures, order, "write")
    )
    monkeypatch.setattr(bench.replay, "plot", lambda figures, path: order.append("plot"))
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY]
    assert bench.replay.main([*argv, "--feedback", "corrections", "--set", "lr=2e-3"]) == 0
    assert order == ["write", "plot"]
    [(_, figures)] = events
    assert figures["overrides"] == {"lr": 0.002} and figures["config"]["lr"] == 0.002


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


def test_a_run_stopped_early_leaves_its_curve_so_far(tiny_model_dir: Path, tmp_path: Path) -> None:
    from bench.preferences import load_preferences

    [sure] = [
        p
        for p in load_preferences(bench.replay.ROOT / "bench" / "data" / "preferences.json")
        if p.name == "starts-with-sure"
    ]
    options = bench.replay.ReplayOptions(
        model_dir=tiny_model_dir,
        preference=sure,
        versions=2,
        batch_size=2,
        gen_tokens=4,
        eval_tokens=4,
        eval_limit=2,
        eval_splits=("held_out",),
    )
    prompts = load_prompts(bench.replay.ROOT / "bench" / "data" / "prompts.json")
    partial = tmp_path / "partial.json"
    figures = bench.replay.run_replay(options, prompts, progress=False, partial=partial)
    written = json.loads(partial.read_text())
    assert written["partial"] is True and written["versions"] == figures["versions"]
    assert written["summary"] == figures["summary"]


def test_the_long_run_switches_the_preference(tiny_model_dir: Path, tmp_path: Path, events) -> None:
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY, "--no-plot"]
    argv += ["--then", "all-lowercase", "--switch-after", "1", "--eval-splits", "held_out"]
    assert bench.replay.main(argv) == 0
    [(_, figures)] = events
    assert [v.get("preference") for v in figures["versions"]] == [
        None,
        "starts-with-sure",
        "all-lowercase",
    ]
    assert set(figures["versions"][2]["scores"]) == {"starts-with-sure", "all-lowercase"}
    assert next(tmp_path.glob("replay-starts-with-sure-then-all-lowercase-*.json"))


def test_the_simulated_user_gives_each_kind_of_feedback() -> None:
    tokenizer = byte_tokenizer()
    prompt = [3, 4, 5]
    answer = Answer("What is gravity?", prompt, [6, 7], [-1.0, -2.0], "Gravity pulls.")
    ids = answer.response_token_ids
    thumbs = react(SURE, answer.text, "thumbs", token_ids=ids)
    assert (thumbs.rating, thumbs.comment, thumbs.correction) == (-1, "", "")
    sample, _ = judged_sample(answer, thumbs, tokenizer)
    assert sample.reward == -1.0 and sample.hint is None
    corrected = react(SURE, answer.text, "corrections", token_ids=ids)
    sample, _ = judged_sample(answer, corrected, tokenizer)
    assert corrected.correction == "Sure! Gravity pulls."
    assert sample.hint == SURE.comment and sample.correction_token_ids[-1] == 2  # eos
    told = react(SURE, answer.text, "next_state", token_ids=ids)
    assert told.rating == 0 and told.next_state.startswith("[user] No,")
    sample, verdict = judged_sample(answer, told, tokenizer)
    assert verdict.score == -1 and sample.reward == -1.0
    # the judge takes what the user asks for, not their complaint: the comment's own words
    assert sample.hint == SURE.comment
    assert sample.teacher_prompt_token_ids != prompt
    thanked = react(SURE, "Sure! Gravity pulls.", "next_state", token_ids=ids)
    sample, verdict = judged_sample(answer, thanked, tokenizer)
    assert verdict.score == 1 and sample.reward == 1.0 and sample.hint is None


LOOP = "Sure!\n\nSure!\n\nSure!\n\nSure!\n\nSure!"
LOOP_IDS = [34355, 17, 198, 198] * 4 + [34355, 17]  # as SmolLM2 encodes it: a 4-token loop


def _tiny_options(model_dir: Path, **changes: Any) -> bench.replay.ReplayOptions:
    """A replay on the tiny model: two answers per update, four-token answers, one prompt."""
    settings: dict[str, Any] = {"batch_size": 2, "gen_tokens": 4, "eval_tokens": 4}
    settings |= {"eval_limit": 1, "eval_splits": ("held_out",)}
    return bench.replay.ReplayOptions(
        model_dir=model_dir, preference=SURE, **{**settings, **changes}
    )


def test_the_preferences_doctests_hold() -> None:
    import doctest

    import bench.preferences

    result = doctest.testmod(bench.preferences)
    assert result.attempted > 0 and result.failed == 0


def test_a_looping_answer_meets_no_preference_however_it_begins() -> None:
    assert SURE.satisfied(LOOP) and not SURE.meets(LOOP, LOOP_IDS)
    assert answer_flaws(LOOP, LOOP_IDS) == ["repeating"]
    assert SURE.meets("Sure! Gravity pulls.", [1, 2, 3, 4])
    assert not SURE.meets("   ", [5])  # empty
    no_emoji = Preference.from_dict({"name": "n", "comment": "c", "rules": {"no_emoji": True}})
    assert not no_emoji.meets("", [])


def test_the_simulated_user_dislikes_a_loop_and_does_not_rewrite_it() -> None:
    tokenizer = byte_tokenizer()
    for feedback in ("thumbs", "comments", "corrections"):
        reaction = react(SURE, LOOP, feedback, token_ids=LOOP_IDS)
        assert reaction.truth == -1 and reaction.rating == -1
        assert reaction.correction == ""  # a rewritten loop would teach the loop
    corrected = react(SURE, LOOP, "corrections", token_ids=LOOP_IDS)
    assert corrected.comment == LOOP_COMMENT  # it does start with "Sure!": only the loop is said
    missed = react(SURE, "Paris Paris Paris Paris", "corrections", token_ids=[9] * 4)
    assert missed.comment == f"{SURE.comment} {LOOP_COMMENT}" and missed.correction == ""
    empty = react(SURE, " ", "comments", token_ids=[5])
    assert empty.comment.startswith(SURE.comment) and "did not answer" in empty.comment
    told = react(SURE, LOOP, "next_state", token_ids=LOOP_IDS)
    answer = Answer("What is gravity?", [3, 4, 5], LOOP_IDS, [-1.0] * len(LOOP_IDS), LOOP)
    sample, verdict = judged_sample(answer, told, tokenizer)
    assert verdict.score == -1 and sample.reward == -1.0 and sample.hint == LOOP_COMMENT


def test_a_refused_update_gives_its_samples_back_with_a_smaller_step_then_excludes_them(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webapp's refusal policy in the replay: every sample is trained, waiting or
    excluded, and the counts add up."""
    monkeypatch.setattr(bench.replay, "gate", lambda probe, base, options: (False, ["test"]))
    # every waiting sample in the batch (no fresh ones left for the next: the test after this)
    options = _tiny_options(tiny_model_dir, feedback="thumbs", versions=4, fresh=0)
    prompts = load_prompts(bench.replay.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    versions = figures["versions"][1:]
    lr = UpdateConfig().lr
    assert [v["lr"] for v in versions] == [lr, lr / 2, lr / 4, lr / 4]
    assert [v["samples"] for v in versions] == [2, 4, 6, 6]  # the first pair out after 3
    assert [v.get("excluded", 0) for v in versions] == [0, 0, 2, 2]
    assert figures["summary"]["excluded"] == 4 and figures["summary"]["refused"] == [1, 2, 3, 4]
    summary = figures["summary"]
    assert (summary["trained"], summary["waiting"], summary["excluded"]) == (0, 4, 4)
    # every sample with a signal is trained, waiting, or excluded: the counts add up
    assert summary["trained"] + summary["waiting"] + summary["excluded"] == 8
    assert figures["judge"]["samples"] == 8
    assert figures["refusal_policy"] == {"lr_factor": 0.5, "max_refusals": 3}
    assert figures["scoring"] == "meets-v2" and "flawed" in figures["versions"][0]
    # a refused version still says what users get: the live version's answers, quoted
    assert all({"broken_examples", "missed_examples"} <= v.keys() for v in versions)


@pytest.mark.parametrize(
    ("algorithm", "left_ready"),
    [("rl", {"hint alone"}), ("opd", {"thumb alone"}), ("combined", set())],
)
def test_the_replay_leaves_ready_what_the_webapps_claim_leaves(
    algorithm: str, left_ready: set[str]
) -> None:
    from trainer.algorithms import algorithm_get
    from trainer.batch import Sample

    shapes = {
        "thumb alone": Sample([1], [2], [-1.0], reward=1.0),
        "hint alone": Sample(
            [1], [2], [-1.0], reward=0.0, hint="Say 'Sure!'.", teacher_prompt_token_ids=[1, 4]
        ),
        "correction alone": Sample([1], [2], [-1.0], reward=0.0, correction_token_ids=[3]),
        "hint and thumb": Sample(
            [1], [2], [-1.0], reward=-1.0, hint="Say 'Sure!'.", teacher_prompt_token_ids=[1, 4]
        ),
    }
    chosen = algorithm_get(algorithm)
    assert {name for name, s in shapes.items() if bench.replay.unused_by(chosen, s)} == left_ready


def test_the_prompt_file_keeps_the_old_split_and_adds_other_kinds() -> None:
    prompts = load_prompts(bench.replay.ROOT / "bench" / "data" / "prompts.json")
    assert len(prompts["held_out"]) == 12 and len(prompts["train"]) == 24
    other = prompts["held_out_other"]
    assert len(other) >= 12 and not set(other) & set(prompts["train"] + prompts["held_out"])
    words = lambda items: sum(len(p.split()) for p in items) / len(items)  # noqa: E731
    assert words(other) > 2 * words(prompts["held_out"])  # longer requests, not paraphrases


def _spy(function, order: list[str], label: str):
    def wrapper(*args, **kwargs):
        order.append(label)
        return function(*args, **kwargs)

    return wrapper


def test_two_users_learn_in_their_own_lineages_and_the_bleed_is_measured(
    tiny_model_dir: Path, tmp_path: Path, events, monkeypatch
) -> None:
    import bench.personal

    monkeypatch.setenv("PARLEY_BENCH_RESULTS", str(tmp_path / "results.jsonl"))
    monkeypatch.setattr(bench.personal, "record", lambda name, f: events.append((name, f)))
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY, "--no-plot"]
    argv += ["--versions", "1", "--eval-splits", "held_out"]
    assert bench.personal.main(argv) == 0
    [(_, figures)] = [e for e in events if e[0] == "personal"]
    assert figures["mode"] == "replay" and (figures["a"], figures["b"]) == (
        "starts-with-sure",
        "all-lowercase",
    )
    [run] = figures["seeds"]
    assert set(run["final_scores"]) == {"base", "A", "B"}
    for who in ("base", "A", "B"):  # every model scored on both preferences
        assert set(run["final_scores"][who]) == {"starts-with-sure", "all-lowercase"}
    assert set(run["bleed"]) == {
        "A on all-lowercase (held_out)",
        "B on starts-with-sure (held_out)",
    }
    assert [len(run["curves"][who]) for who in ("A", "B")] == [2, 2]  # v0 and v1
    assert len(list(tmp_path.glob("replay-*.json"))) == 2  # each user's run written


def test_bleed_is_the_other_users_preference_against_the_base() -> None:
    import bench.personal

    scores = {
        "base": {"x": {"s": 0.1}, "y": {"s": 0.2}},
        "A": {"x": {"s": 0.9}, "y": {"s": 0.25}},
        "B": {"x": {"s": 0.0}, "y": {"s": 1.0}},
    }
    assert bench.personal.bleed(scores, "x", "y") == {"A on y (s)": 0.05, "B on x (s)": -0.1}


def test_answers_of_another_length_are_named_in_the_file_and_the_table(tmp_path: Path) -> None:
    """A run at longer answers (e.g. "ends with a question", which needs answers that end) is
    not mistaken for one at the defaults."""
    figures = {
        "preference": "ends-with-question",
        "second_preference": None,
        "feedback": "corrections",
        "algorithm": "combined",
        "seed": 0,
        "batch_size": bench.replay.BATCH_SIZE,
        "overrides": {},
        "gen_tokens": 128,
        "eval_tokens": 128,
        "gate": {"holdout": bench.replay.GATE_HOLDOUT_SAMPLES, "fresh": 2},
        "scoring": bench.replay.SCORING,
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
        "batch_size": bench.replay.BATCH_SIZE,
        "overrides": {},
        "gate": {"max_kl": 0.5, "max_ppl_ratio": 1.1, "max_degenerate_extra": 1, "holdout": 8}
        | {"fresh": bench.replay.GATE_FRESH_SAMPLES},
        "scoring": bench.replay.SCORING,
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
    old |= {"gate": {"holdout": bench.replay.GATE_HOLDOUT_SAMPLES, "fresh": 2}}
    old |= {"overrides": {}, "versions": versions, "judge": {"right": 0, "parsed": 0, "votes": 0}}
    old |= {"summary": bench.replay.summarise(versions, "p"), "seconds_per_version": 1.0}
    flawed = [{**v, "flawed": {"held_out": 0.25 * v["version"]}} for v in versions]
    new = {**old, "scoring": bench.replay.SCORING, "versions": flawed}
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
    assert bench.replay.summarise(versions, "p")["worst_witness_ppl_ratio"] is None
    row = {"mode": "replay", "settings": "defaults", "algorithm": "combined"}
    row |= {"feedback": "corrections", "preference": "p", "seeds": [0]}
    row |= {"worst ppl×": [1.1], "worst witness ppl×": []}
    table = bench.sweep.markdown([row], ["worst ppl×", "worst witness ppl×"])
    assert table.splitlines()[-1].endswith("| 1.100 | — |")


def test_the_witness_texts_are_in_neither_the_probe_nor_the_anchor() -> None:
    from bench.witness import WITNESS_TEXTS
    from trainer.anchor import ANCHOR_TEXTS
    from trainer.probes import PROBE_TEXT

    seen = " ".join((PROBE_TEXT, *ANCHOR_TEXTS))
    for text in WITNESS_TEXTS:
        for sentence in (s.strip() for s in text.split(".") if len(s.strip()) > 20):
            assert sentence not in seen


def test_runs_whose_gate_held_nothing_back_never_share_a_row_with_those_that_did(
    tmp_path: Path,
) -> None:
    """Before the tenth session the replay's gate saw no held-back feedback (the webapp's did):
    such a run is labelled holdout=0, computed or stored, and a new run with --holdout 0 is
    named so in its file too."""
    figures = {"preference": "p", "feedback": "corrections", "algorithm": "rl", "seed": 1}
    figures |= {"overrides": {}, "scoring": bench.replay.SCORING, "second_preference": None}
    figures |= {"batch_size": bench.replay.BATCH_SIZE, "gate": {"max_kl": 0.5}}
    assert bench.sweep.run_label(figures) == "holdout=0"
    assert bench.sweep.run_label({**figures, "settings_label": "lr=0.001"}) == "lr=0.001, holdout=0"
    old_scoring = {**figures, "scoring": None, "settings_label": "defaults (loops counted)"}
    assert bench.sweep.run_label(old_scoring) == "holdout=0 (loops counted)"
    held = {**figures, "gate": {"max_kl": 0.5, "holdout": 8, "fresh": 2}}
    assert bench.sweep.run_label(held) == "defaults"
    # held back, before updates left their newest samples for the next (the fourteenth session)
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


def test_the_replay_holds_back_recent_signed_samples_as_the_webapp_does() -> None:
    from trainer.batch import Sample

    def sample(n: int, reward: float, correction: list[int] | None = None) -> Sample:
        return Sample([1], [n], [-1.0], reward=reward, correction_token_ids=correction)

    trained = [sample(0, 1.0), sample(1, -1.0), sample(2, 0.0), sample(3, 0.0, [7])]
    held = bench.replay.held_back(trained, 8)
    assert [s.response_token_ids for s in held] == [[3], [1], [0]]  # newest first, signed only
    assert [s.response_token_ids for s in bench.replay.held_back(trained, 1)] == [[3]]
    assert bench.replay.held_back(trained, 0) == []
    # never the batch that trained the live version: it has just fitted those
    held = bench.replay.held_back(trained, 8, live_batch=trained[2:])
    assert [s.response_token_ids for s in held] == [[1], [0]]


def test_each_candidate_is_checked_on_what_the_published_versions_were_trained_on(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay's gate sees the webapp's holdout: from the second update on, the signed
    samples trained before, with the candidate's, the live version's and the base's loops on
    their prompts recorded apart."""
    monkeypatch.setattr(bench.replay, "gate", lambda probe, base, options: (True, []))
    # every answer signed; two per update, so none left fresh (at most a quarter is)
    options = _tiny_options(tiny_model_dir, feedback="thumbs", versions=3)
    prompts = load_prompts(bench.replay.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    first, second, third = (v["held_back"] for v in figures["versions"][1:])
    nothing = {"feedback_delta": 0.0, "feedback_samples": 0.0}
    nothing |= {"fresh_feedback_delta": 0.0, "fresh_feedback_samples": 0.0}
    assert first == nothing  # nothing trained yet
    # v2: only v1's batch is on record, and v1 (live) was trained on it: nothing held back
    assert second == nothing
    assert third["feedback_samples"] == 2  # v1's batch, not v2's (the live version's own)
    for kind in ("repeating", "empty"):
        for who in ("held_back", "held_back_live", "held_back_base"):
            assert f"{who}_{kind}" in third
    assert 1 <= third["held_back_prompts"] <= 4
    assert figures["gate"]["holdout"] == bench.replay.GATE_HOLDOUT_SAMPLES


def test_each_update_leaves_its_newest_samples_to_check_the_next_candidate(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the webapp's claim: the newest signed samples (at most a quarter of those waiting)
    wait for the next update, and the gate scores the candidate on them: feedback no version
    has trained on. Each is trained once, by the next update."""
    monkeypatch.setattr(bench.replay, "gate", lambda probe, base, options: (True, []))
    options = _tiny_options(tiny_model_dir, feedback="thumbs", versions=3, batch_size=8)
    prompts = load_prompts(bench.replay.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    versions = figures["versions"][1:]
    assert [v["samples"] for v in versions] == [6, 8, 8]  # 8 new, 2 left; 2 + 8, 2 left ...
    assert [v["held_back"]["fresh_feedback_samples"] for v in versions] == [2, 2, 2]
    assert [v["waiting"] for v in versions] == [2, 2, 2]
    summary = figures["summary"]
    assert (summary["trained"], summary["waiting"], summary["excluded"]) == (22, 2, 0)
    assert figures["gate"]["fresh"] == bench.replay.GATE_FRESH_SAMPLES


def test_opd_leaves_a_thumb_alone_ready_as_the_webapp_does(tiny_model_dir: Path) -> None:
    """With thumbs only, opd has nothing to train: no update is made (the trainer raised on
    such a batch), and every sample stays waiting, so the counts still add up."""
    options = _tiny_options(tiny_model_dir, feedback="thumbs", algorithm="opd", versions=2)
    prompts = load_prompts(bench.replay.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    for version in figures["versions"][1:]:
        assert not version["published"]
        assert version["reasons"] == ["no sample with a signal this algorithm trains on"]
    summary = figures["summary"]
    assert (summary["trained"], summary["waiting"], summary["excluded"]) == (0, 4, 0)
    assert figures["judge"]["samples"] == 4


def test_an_evaluation_quotes_the_answers_that_miss_and_keeps_loops_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A score under its target can be read: the answers that miss the preference without being
    broken are quoted per split (at most ``MISSED_EXAMPLES``), loops only among the broken."""
    import bench.answering

    loop = "Sure! " * 12
    texts = {
        "held_out": ["Sure! Paris.", "Paris is the capital.", loop],
        "held_out_other": ["Here is a plan.", "First, boil water.", "Then", "Add salt.", "Done."],
    }

    def fake_generate(model: Any, tokenizer: Any, prompts: list[str], **_: Any) -> list[Answer]:
        flat = [t for split in texts.values() for t in split]
        assert len(prompts) == len(flat)  # one batch for every split
        ids = [[5, 6] * 12 if t == loop else list(range(len(t))) for t in flat]
        return [Answer(p, [1], i, [], t) for p, i, t in zip(prompts, ids, flat, strict=True)]

    monkeypatch.setattr(bench.answering, "generate", fake_generate)
    splits = {split: [f"q{k}" for k in range(len(t))] for split, t in texts.items()}
    result = bench.answering.evaluate_splits(None, None, splits, [SURE], max_new_tokens=48)

    assert result.scores == {"sure": {"held_out": 1 / 3, "held_out_other": 0.0}}
    assert result.flawed == {"held_out": 1 / 3, "held_out_other": 0.0}
    assert result.broken_examples == [loop[: bench.answering.EXAMPLE_CHARS]]
    assert result.missed_examples == {
        "sure": {
            "held_out": ["Paris is the capital."],
            "held_out_other": ["Here is a plan.", "First, boil water.", "Then"],
        }
    }


def test_the_benchmarks_useful_updates_pass_32_versions_in_a_row(tiny_model_dir: Path) -> None:
    """The gate limits each step, never the distance from the base: 32 corrections batches in
    a row, at the default settings and the default gate, are all published, and the lineage
    ends farther from the base than ten of its largest steps (a gate measuring KL from the base
    at the size of one step would have stopped it after a few versions)."""
    options = _tiny_options(tiny_model_dir, feedback="corrections", versions=32)
    prompts = load_prompts(bench.replay.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    summary, versions = figures["summary"], figures["versions"][1:]
    assert summary["refused"] == [] and len(versions) == 32
    assert (summary["trained"], summary["waiting"], summary["excluded"]) == (64, 0, 0)
    # from v3 on the gate held back feedback the live version was not trained on
    assert all(v["held_back"]["feedback_samples"] > 0 for v in versions[2:])
    largest_step = max(v["probe_kl"] for v in versions)
    assert summary["farthest_from_base_kl"] > 10 * largest_step > 0


def test_a_row_is_named_by_what_differs_from_todays_defaults_not_those_of_its_day() -> None:
    """A run recorded when batch_baseline was off by default says so; a run that set it on
    when it was not yet the default is a defaults run now; how a run computed is never named."""
    config = dataclasses.asdict(trainer.config.UpdateConfig())
    base = {"preference": "p", "feedback": "corrections", "algorithm": "combined", "seed": 0}
    base |= {"gate": {"holdout": bench.replay.GATE_HOLDOUT_SAMPLES, "fresh": 2}}
    base |= {"batch_size": bench.replay.BATCH_SIZE, "scoring": bench.replay.SCORING}
    then_default = {**base, "overrides": {}, "config": {**config, "batch_baseline": False}}
    assert bench.sweep.run_label(then_default) == "batch_baseline=False"
    set_then = {**base, "overrides": {"batch_baseline": True}, "config": config}
    assert bench.sweep.run_label(set_then) == "defaults"
    on_a_gpu = {**config, "base_dtype": "float32", "gradient_checkpointing": False, "seed": 2}
    assert bench.sweep.run_label({**base, "overrides": {}, "config": on_a_gpu}) == "defaults"
    # a run that recorded no config: its overrides that differ
    no_config = {**base, "overrides": {"lr": 3e-4, "batch_baseline": True}}
    assert bench.sweep.run_label(no_config) == "lr=0.0003"
