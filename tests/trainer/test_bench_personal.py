"""bench.personal: two users in their own lineages, and the bleed of one's preference into the
other's answers."""

from __future__ import annotations

from pathlib import Path

from tests.trainer.replay_helpers import TINY


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
