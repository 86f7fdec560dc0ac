"""bench.replay with --feedback memory on a tiny random model: the preference said once as a
memory, every answer served with it and distilled, each version scored with and without it."""

from __future__ import annotations

import doctest
from pathlib import Path

import bench.replay
import bench.replay_memory
from bench.answering import generate
from bench.replay_figures import format_run
from tests.trainer.replay_helpers import SURE, TINY
from trainer.algorithms import algorithm_get
from trainer.memory_prompt import MARKER


def test_the_doctests_hold() -> None:
    assert doctest.testmod(bench.replay_memory).failed == 0


def test_a_memory_run_scores_every_version_with_and_without_the_memory(
    tiny_model_dir: Path, tmp_path: Path, events
) -> None:
    argv = ["--model-dir", str(tiny_model_dir), "--out-dir", str(tmp_path), *TINY]
    assert bench.replay.main([*argv, "--feedback", "memory", "--no-plot"]) == 0
    [(name, figures)] = events
    assert name == "replay" and figures["feedback"] == "memory"
    versions = figures["versions"]
    assert [v["version"] for v in versions] == [0, 1, 2]
    for version in versions:
        for key in ("score", "score_without_memory"):
            assert 0.0 <= version[key] <= 1.0
        assert version["score"] == version["scores"]["starts-with-sure"]["held_out"]
        assert set(version["scores_without_memory"]) == {"starts-with-sure"}
    assert figures["base_score"] == versions[0]["score_without_memory"]
    assert figures["memory"] == "Please always start your answer with 'Sure!'"
    # nothing is judged: every answer is a memory sample, trained by the next update
    assert figures["judge"]["votes"] == 0 and figures["judge"]["samples"] == 4
    assert [v["samples"] for v in versions[1:]] == [2, 2]
    for version in versions[1:]:
        [gap] = version["memory_gaps"]  # the gate's gap, measured on the candidate
        assert gap["memory"] == figures["memory"] and "base_gap" in gap
    assert "without memory" in format_run(figures).splitlines()[1]


def test_an_answer_served_with_the_memory_distils_it(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    from bench.answering import load_serving_model

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model = load_serving_model(tiny_model_dir, None)
    memories = bench.replay_memory.memories_of("memory", SURE)
    answers = generate(
        model, tokenizer, ["Hi"], max_new_tokens=3, temperature=0.7, seed=0, memories=memories
    )
    [sample] = bench.replay_memory.memory_samples(answers, memories, tokenizer)
    assert sample.distils_context and sample.reward is None
    assert MARKER.strip() in tokenizer.decode(sample.teacher_prompt_token_ids)
    assert MARKER.strip() not in tokenizer.decode(sample.prompt_token_ids)
    assert sample.teacher_prompt_token_ids == answers[0].prompt_token_ids  # as served
    # every algorithm trains a memory's distillation, as the webapp's claim does
    for name in ("rl", "opd", "combined"):
        assert not bench.replay.unused_by(algorithm_get(name), sample)
