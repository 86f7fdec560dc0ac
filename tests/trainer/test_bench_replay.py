"""bench.replay on a tiny random model: versions through the real trainer and gate, the
claim rules the webapp uses, refusals, and figures recorded before any plot."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import bench.common
import bench.replay
import bench.replay_claim
import bench.replay_figures
import bench.replay_options
import bench.sweep
from bench.preferences import load_prompts
from bench.simulated_user import Answer
from tests.trainer.replay_helpers import SURE, TINY, spy, tiny_options
from trainer.config import UpdateConfig


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
        bench.replay, "write_figures", spy(bench.replay.write_figures, order, "write")
    )
    monkeypatch.setattr(bench.replay, "plot", lambda figures, path: order.append("plot"))
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY]
    assert bench.replay.main([*argv, "--feedback", "corrections", "--set", "lr=2e-3"]) == 0
    assert order == ["write", "plot"]
    [(_, figures)] = events
    assert figures["overrides"] == {"lr": 0.002} and figures["config"]["lr"] == 0.002


def test_a_run_stopped_early_leaves_its_curve_so_far(tiny_model_dir: Path, tmp_path: Path) -> None:
    from bench.preferences import load_preferences

    [sure] = [
        p
        for p in load_preferences(bench.common.ROOT / "bench" / "data" / "preferences.json")
        if p.name == "starts-with-sure"
    ]
    options = bench.replay_options.ReplayOptions(
        model_dir=tiny_model_dir,
        preference=sure,
        versions=2,
        batch_size=2,
        gen_tokens=4,
        eval_tokens=4,
        eval_limit=2,
        eval_splits=("held_out",),
    )
    prompts = load_prompts(bench.common.ROOT / "bench" / "data" / "prompts.json")
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


def test_a_refused_update_gives_its_samples_back_with_a_smaller_step_then_excludes_them(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webapp's refusal policy in the replay: every sample is trained, waiting or
    excluded, and the counts add up."""
    monkeypatch.setattr(bench.replay, "gate", lambda probe, base, options: (False, ["test"]))
    # every waiting sample in the batch (no fresh ones left for the next: the test after this);
    # the 👎 alone, without the answers sampled beside them, keeps the counts small
    options = tiny_options(tiny_model_dir, feedback="thumbs", versions=4, fresh=0, alternatives=0)
    prompts = load_prompts(bench.common.ROOT / "bench" / "data" / "prompts.json")
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
    unused = bench.replay_claim.unused_by
    assert {name for name, s in shapes.items() if unused(chosen, s)} == left_ready


def test_the_witness_texts_are_in_neither_the_probe_nor_the_anchor() -> None:
    from bench.witness import WITNESS_TEXTS
    from trainer.anchor import ANCHOR_TEXTS
    from trainer.probes import PROBE_TEXT

    seen = " ".join((PROBE_TEXT, *ANCHOR_TEXTS))
    for text in WITNESS_TEXTS:
        for sentence in (s.strip() for s in text.split(".") if len(s.strip()) > 20):
            assert sentence not in seen


def test_the_replay_holds_back_recent_signed_samples_as_the_webapp_does() -> None:
    from trainer.batch import Sample

    def sample(n: int, reward: float, correction: list[int] | None = None) -> Sample:
        return Sample([1], [n], [-1.0], reward=reward, correction_token_ids=correction)

    trained = [sample(0, 1.0), sample(1, -1.0), sample(2, 0.0), sample(3, 0.0, [7])]
    held = bench.replay_claim.held_back(trained, 8)
    assert [s.response_token_ids for s in held] == [[3], [1], [0]]  # newest first, signed only
    assert [s.response_token_ids for s in bench.replay_claim.held_back(trained, 1)] == [[3]]
    assert bench.replay_claim.held_back(trained, 0) == []
    # never the batch that trained the live version: it has just fitted those
    held = bench.replay_claim.held_back(trained, 8, live_batch=trained[2:])
    assert [s.response_token_ids for s in held] == [[1], [0]]


def test_each_candidate_is_checked_on_what_the_published_versions_were_trained_on(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay's gate sees the webapp's holdout: from the second update on, the signed
    samples trained before, with the candidate's loops on their prompts (and the live
    version's and the base's where the gate needs them) recorded apart."""
    monkeypatch.setattr(bench.replay, "gate", lambda probe, base, options: (True, []))
    # every answer signed; two per update, so none left fresh (at most a quarter is)
    options = tiny_options(tiny_model_dir, feedback="thumbs", versions=3)
    prompts = load_prompts(bench.common.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    first, second, third = (v["held_back"] for v in figures["versions"][1:])
    nothing = {"feedback_delta": 0.0, "feedback_samples": 0.0}
    nothing |= {"fresh_feedback_delta": 0.0, "fresh_feedback_samples": 0.0}
    assert first == nothing  # nothing trained yet
    # v2: only v1's batch is on record, and v1 (live) was trained on it: nothing held back
    assert second == nothing
    assert third["feedback_samples"] == 2  # v1's batch, not v2's (the live version's own)
    # the candidate's loops always; the live version's and the base's only where the gate
    # needs them to decide (trainer.probing.probe_model)
    kinds = ("repeating", "empty")
    assert all(f"held_back_{kind}" in third for kind in kinds)
    bad = any(third[f"held_back_{kind}"] for kind in kinds)
    assert all((f"held_back_live_{kind}" in third) == bad for kind in kinds)
    worse = bad and any(
        third[f"held_back_{kind}"] > third[f"held_back_live_{kind}"] for kind in kinds
    )
    assert all((f"held_back_base_{kind}" in third) == worse for kind in kinds)
    assert 1 <= third["held_back_prompts"] <= 4
    assert figures["gate"]["holdout"] == bench.replay_options.GATE_HOLDOUT_SAMPLES


def test_each_update_leaves_its_newest_samples_to_check_the_next_candidate(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the webapp's claim: the newest signed samples (at most a quarter of those waiting)
    wait for the next update, and the gate scores the candidate on them: feedback no version
    has trained on. Each is trained once, by the next update."""
    monkeypatch.setattr(bench.replay, "gate", lambda probe, base, options: (True, []))
    # (the 👎 alone: the answers sampled beside them would only change the counts)
    options = tiny_options(
        tiny_model_dir, feedback="thumbs", versions=3, batch_size=8, alternatives=0
    )
    prompts = load_prompts(bench.common.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    versions = figures["versions"][1:]
    assert [v["samples"] for v in versions] == [6, 8, 8]  # 8 new, 2 left; 2 + 8, 2 left ...
    assert [v["held_back"]["fresh_feedback_samples"] for v in versions] == [2, 2, 2]
    assert [v["waiting"] for v in versions] == [2, 2, 2]
    summary = figures["summary"]
    assert (summary["trained"], summary["waiting"], summary["excluded"]) == (22, 2, 0)
    assert figures["gate"]["fresh"] == bench.replay_options.GATE_FRESH_SAMPLES


def test_opd_leaves_a_thumb_alone_ready_as_the_webapp_does(tiny_model_dir: Path) -> None:
    """With thumbs only, opd has nothing to train: no update is made (the trainer raised on
    such a batch), and every sample stays waiting, so the counts still add up."""
    options = tiny_options(
        tiny_model_dir, feedback="thumbs", algorithm="opd", versions=2, alternatives=0
    )
    prompts = load_prompts(bench.common.ROOT / "bench" / "data" / "prompts.json")
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
    options = tiny_options(tiny_model_dir, feedback="corrections", versions=32)
    prompts = load_prompts(bench.common.ROOT / "bench" / "data" / "prompts.json")
    figures = bench.replay.run_replay(options, prompts, progress=False)
    summary, versions = figures["summary"], figures["versions"][1:]
    assert summary["refused"] == [] and len(versions) == 32
    assert (summary["trained"], summary["waiting"], summary["excluded"]) == (64, 0, 0)
    # from v3 on the gate held back feedback the live version was not trained on
    assert all(v["held_back"]["feedback_samples"] > 0 for v in versions[2:])
    largest_step = max(v["probe_kl"] for v in versions)
    assert summary["farthest_from_base_kl"] > 10 * largest_step > 0
