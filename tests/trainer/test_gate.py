"""The probe gate: pure decisions, and probe figures measured on a tiny model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from tests.trainer.probing_helpers import chat_sample, probe_metrics
from trainer.batch import Sample, chat_prompt_ids
from trainer.config import UpdateConfig
from trainer.degenerate import degenerate_kinds
from trainer.gate import gate_decision
from trainer.optimizer_state import OPTIMIZER_STATE_FILE
from trainer.pipeline import train_and_probe
from trainer.probes import PROBE_PROMPTS, PROBE_TEXT
from trainer.probing import feedback_target
from trainer.update import run_update

BASE = {"probe_kl": 0.0, "probe_ppl": 20.0}


def test_a_candidate_within_both_limits_passes() -> None:
    assert gate_decision({"probe_kl": 0.05, "probe_ppl": 22.0}, BASE, 0.1, 1.2) == (True, [])


def test_too_much_kl_fails_and_says_so() -> None:
    passed, reasons = gate_decision({"probe_kl": 0.5, "probe_ppl": 20.0}, BASE, 0.1, 1.2)
    assert not passed
    assert len(reasons) == 1 and "KL" in reasons[0]


def test_perplexity_above_the_ratio_fails_and_says_so() -> None:
    passed, reasons = gate_decision({"probe_kl": 0.0, "probe_ppl": 24.1}, BASE, 0.1, 1.2)
    assert not passed
    assert len(reasons) == 1 and "perplexity" in reasons[0]


def test_both_failures_are_reported() -> None:
    passed, reasons = gate_decision({"probe_kl": 1.0, "probe_ppl": 99.0}, BASE, 0.1, 1.2)
    assert not passed and len(reasons) == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_figures_never_pass(bad: float) -> None:
    assert not gate_decision({"probe_kl": bad, "probe_ppl": 20.0}, BASE, 0.1, 1.2)[0]
    assert not gate_decision({"probe_kl": 0.0, "probe_ppl": bad}, BASE, 0.1, 1.2)[0]


def test_limits_are_inclusive() -> None:
    assert gate_decision({"probe_kl": 0.1, "probe_ppl": 24.0}, BASE, 0.1, 1.2)[0]


def test_the_default_probe_set_is_non_trivial() -> None:
    assert len(PROBE_PROMPTS) >= 3 and len(PROBE_TEXT.split()) >= 50


def test_probe_kl_is_zero_for_the_base_and_positive_after_training(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    prompt = list(range(10, 30))
    samples = [
        Sample(prompt, [40 + i, 50 + i, 60 + i], [-5.0, -5.0, -5.0], reward=r)
        for i, r in enumerate([1.0, -1.0, 1.0, -1.0])
    ]
    *_, summary = run_update(
        UpdateConfig(lr=5e-2, algorithm="rl"),
        samples,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "adapter",
    )
    prompts = PROBE_PROMPTS[:2]
    base = probe_metrics(tiny_model_dir, None, prompts, PROBE_TEXT, max_new_tokens=8)
    candidate = probe_metrics(
        tiny_model_dir, summary["adapter_dir"], prompts, PROBE_TEXT, max_new_tokens=8
    )
    assert base["probe_kl"] == 0.0 and base["probe_kl_tokens"] > 0
    assert candidate["probe_kl"] > 0.0
    # a random model over 300 tokens is close to uniform: perplexity near the vocabulary size
    assert 100 < base["probe_ppl"] < 1000
    assert candidate["probe_ppl"] != base["probe_ppl"]
    assert gate_decision(candidate, base, max_kl=1e9, max_ppl_ratio=1e9) == (True, [])
    assert not gate_decision(candidate, base, max_kl=0.0, max_ppl_ratio=1e9)[0]


# --- degenerate answers, held-back feedback, the step to the live version -----------------


def test_a_plain_answer_is_not_degenerate() -> None:
    kinds = degenerate_kinds(
        "Put it in boiling water.", [1, 2, 3, 4], ended=True, max_new_tokens=24
    )
    assert kinds == []


@pytest.mark.parametrize(
    ("answer", "ids", "ended", "kind"),
    [
        ("", [], True, "empty"),
        ("  \n", [7, 8], True, "empty"),
        ("no no no no", [5, 5, 5, 5], True, "repeating"),
        ("ab ab ab ab", [1, 2, 1, 2, 1, 2, 1, 2], True, "repeating"),
        ("Boil an egg: Boil an egg: …", [7, 8, 9, 10, 11, 12] * 4, False, "repeating"),
        ("It is a long answer that", list(range(24)), False, "cut_off"),
        ("Boil the egg, затем остудите его в воде", [1, 2, 3], True, "language_switch"),
        ("Boil it 水を沸かして卵を入れる", [1, 2, 3], True, "language_switch"),
    ],
)
def test_each_kind_of_degenerate_answer_is_measured(
    answer: str, ids: list[int], ended: bool, kind: str
) -> None:
    assert kind in degenerate_kinds(answer, ids, ended=ended, max_new_tokens=24)


def test_what_is_not_degenerate() -> None:
    # Ended, or stopped short of the limit: not cut off.
    assert degenerate_kinds("Hello", list(range(24)), ended=True, max_new_tokens=24) == []
    assert degenerate_kinds("Hello", [1, 2], ended=False, max_new_tokens=24) == []
    # A few foreign words in an English answer are not a switch of language.
    mostly_english = "Thanks, or merci, or спасибо to you all, friends"
    assert degenerate_kinds(mostly_english, [1], ended=True, max_new_tokens=24) == []
    # Nor is an answer wholly in another language (a user may want one), Japanese included.
    for other in ("Это ответ на другом языке", "水を沸かして卵を入れる"):
        assert degenerate_kinds(other, [1, 2, 3], ended=True, max_new_tokens=24) == []


def test_more_degenerate_answers_than_the_base_fail_the_gate() -> None:
    base = {**BASE, "degenerate_repeating": 1.0, "degenerate_empty": 0.0}
    passed, reasons = gate_decision(
        {"probe_kl": 0.0, "probe_ppl": 20.0, "degenerate_repeating": 3.0}, base, 0.1, 1.2
    )
    assert not passed and reasons == ["3 repeating probe answers (base: 1)"]
    as_many = {"probe_kl": 0.0, "probe_ppl": 20.0, "degenerate_repeating": 1.0}
    assert gate_decision(as_many, base, 0.1, 1.2) == (True, [])
    one_more = {**as_many, "degenerate_repeating": 2.0}
    assert not gate_decision(one_more, base, 0.1, 1.2)[0]
    assert gate_decision(one_more, base, 0.1, 1.2, max_degenerate_extra=1)[0]


def test_scoring_worse_than_live_on_held_back_feedback_fails_the_gate() -> None:
    worse = {"probe_kl": 0.0, "probe_ppl": 20.0, "feedback_delta": -0.2, "feedback_samples": 4}
    passed, reasons = gate_decision(worse, BASE, 0.1, 1.2, max_feedback_drop=0.05)
    assert not passed and "held-back feedback" in reasons[0]
    within = {**worse, "feedback_delta": -0.04}
    assert gate_decision(within, BASE, 0.1, 1.2, max_feedback_drop=0.05)[0]
    nothing_held_back = {**worse, "feedback_samples": 0}
    assert gate_decision(nothing_held_back, BASE, 0.1, 1.2)[0]
    assert not gate_decision({**worse, "feedback_delta": math.nan}, BASE, 0.1, 1.2)[0]


def test_what_held_back_feedback_asks_for() -> None:
    liked = Sample([1], [5, 6], [-1.0, -1.0], reward=1.0)
    disliked = Sample([1], [5, 6], [-1.0, -1.0], reward=-1.0)
    corrected = Sample([1], [5, 6], [-1.0, -1.0], reward=-1.0, correction_token_ids=[9])
    hint_only = Sample([1], [5, 6], [-1.0, -1.0], hint="x", teacher_prompt_token_ids=[1, 2])
    assert feedback_target(liked) == ([5, 6], 1.0)
    assert feedback_target(disliked) == ([5, 6], -1.0)
    assert feedback_target(corrected) == ([9], 1.0)
    assert feedback_target(hint_only) is None


ALL_MODULES = ("q_proj", "v_proj", "o_proj", "up_proj", "down_proj")


def _update(tiny_model_dir: Path, out: Path, lr: float, init: Path | None = None) -> dict:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    train = [chat_sample(tokenizer, f"question {i}?", "Sure! ok") for i in range(4)]
    held_back = [chat_sample(tokenizer, f"other {i}?", "Sure! fine") for i in range(3)]
    fresh = [chat_sample(tokenizer, "newest?", "Sure! new")]  # no version trained on it
    *_, summary = train_and_probe(
        # batch_baseline off: the four liked answers keep their +1, a signal a huge learning
        # rate blows up on (centred, an all-liked batch carries no reward signal)
        UpdateConfig(lr=lr, target_modules=ALL_MODULES, batch_baseline=False),
        train,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=init,
        out_adapter_dir=out,
        probe_prompts=PROBE_PROMPTS[:2],
        max_new_tokens=8,
        holdout=held_back,
        fresh=fresh,
    )
    return summary


def test_a_broken_update_is_refused_and_a_small_useful_one_passes(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    defaults = {"max_kl": 0.5, "max_ppl_ratio": 1.15, "max_feedback_drop": 0.05}
    useful = _update(tiny_model_dir, tmp_path / "useful", lr=1e-3)
    assert useful["probe"]["feedback_samples"] == 3 and useful["probe"]["feedback_delta"] > 0
    # all three held back are corrections: the wanted side is the whole delta
    assert useful["probe"]["feedback_delta_wanted"] == useful["probe"]["feedback_delta"]
    assert "feedback_delta_disliked" not in useful["probe"]
    # the newest feedback, which the update left for the next, rose too
    assert useful["probe"]["fresh_feedback_samples"] == 1
    assert useful["probe"]["fresh_feedback_delta"] > 0
    assert useful["probe"]["held_back_prompts"] == 4  # their answers counted for loops
    # the base answered them only if the candidate gave more bad answers than the live version
    counts = useful["probe"]
    worse = any(
        counts[f"held_back_{kind}"] > counts.get(f"held_back_live_{kind}", 0.0)
        for kind in ("repeating", "empty")
    )
    assert ({"held_back_repeating", "held_back_empty"} <= useful["base_probe"].keys()) == worse
    assert gate_decision(useful["probe"], useful["base_probe"], **defaults) == (True, [])
    broken = _update(tiny_model_dir, tmp_path / "broken", lr=1.0)
    passed, reasons = gate_decision(broken["probe"], broken["base_probe"], **defaults)
    assert not passed and reasons


def test_the_step_is_measured_from_the_live_version_not_the_base(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    first = _update(tiny_model_dir, tmp_path / "v1", lr=5e-2)
    assert first["optimizer_state"] == "new" and first["optimizer_steps"] == 2
    # From v1, an update that does not move (lr 0): no step, yet far from the base.
    second = _update(tiny_model_dir, tmp_path / "v2", lr=0.0, init=tmp_path / "v1")
    assert second["probe"]["probe_kl"] < 1e-6 < second["probe"]["probe_kl_base"]
    assert second["probe"]["feedback_delta"] == pytest.approx(0.0, abs=1e-6)
    assert second["probe"]["fresh_feedback_delta"] == pytest.approx(0.0, abs=1e-6)
    # The second update continued the first's AdamW moments (its step counter went on).
    assert second["optimizer_state"] == "continued" and second["optimizer_steps"] == 4
    assert (tmp_path / "v2" / OPTIMIZER_STATE_FILE).is_file()


def test_the_probe_answers_in_one_batch_are_the_answers_one_by_one(prepared_model: Path) -> None:
    """The gate answers its probe prompts in one left-padded batch; each answer (cut after its
    stop token, unpadded) must be what the model answers to that prompt alone, with the same
    degenerate kinds, or the gate's figures would depend on the batch."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.probing import _greedy_answers

    tokenizer = AutoTokenizer.from_pretrained(str(prepared_model))
    model = AutoModelForCausalLM.from_pretrained(str(prepared_model), dtype=torch.float32).eval()
    batched = _greedy_answers(model, tokenizer, PROBE_PROMPTS, 24)
    for prompt, (sequence_1_T, prompt_length, kinds) in zip(PROBE_PROMPTS, batched, strict=True):
        ids = chat_prompt_ids(tokenizer, [{"role": "user", "content": prompt}])
        with torch.no_grad():
            alone_1_T = model.generate(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=24,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=tokenizer.pad_token_id,
            )
        assert prompt_length == len(ids)
        assert sequence_1_T.tolist() == alone_1_T.tolist(), prompt
        answer_ids = alone_1_T[0, len(ids) :].tolist()
        ended = tokenizer.eos_token_id in answer_ids
        if ended:
            answer_ids = answer_ids[: answer_ids.index(tokenizer.eos_token_id)]
        text = tokenizer.decode(answer_ids, skip_special_tokens=True)
        assert kinds == degenerate_kinds(text, answer_ids, ended=ended, max_new_tokens=24)


def test_looping_answers_may_have_an_allowance_of_their_own() -> None:
    base = {"probe_ppl": 10.0, "degenerate_repeating": 0.0, "degenerate_cut_off": 1.0}
    candidate = {"probe_kl": 0.01, "probe_ppl": 10.0}
    candidate |= {"degenerate_repeating": 1.0, "degenerate_cut_off": 2.0}
    assert gate_decision(candidate, base, 0.5, 1.15, max_degenerate_extra=1) == (True, [])
    passed, reasons = gate_decision(
        candidate, base, 0.5, 1.15, max_degenerate_extra=1, max_repeating_extra=0
    )
    assert not passed and reasons == ["1 repeating probe answers (base: 0)"]  # cut-off still 1


def test_looping_on_the_held_back_prompts_fails_unless_the_live_version_loops_as_much() -> None:
    base = {"probe_ppl": 10.0, "held_back_repeating": 0.0, "held_back_empty": 0.0}
    candidate = {"probe_kl": 0.01, "probe_ppl": 10.0, "held_back_prompts": 8.0}
    loops = candidate | {"held_back_repeating": 3.0, "held_back_live_repeating": 1.0}
    passed, reasons = gate_decision(loops, base, 0.5, 1.15, max_degenerate_extra=1)
    assert not passed
    assert reasons == ["3 repeating answers to 8 held-back prompts (live: 1, base: 0)"]
    # A loop already served may shrink or stay while it is trained away, never grow.
    assert gate_decision(loops | {"held_back_live_repeating": 3.0}, base, 0.5, 1.15)[0]
    # The base's own loops and the allowance count as on the probes.
    one = candidate | {"held_back_repeating": 1.0, "held_back_live_repeating": 0.0}
    assert gate_decision(one, base, 0.5, 1.15, max_degenerate_extra=1)[0]
    assert not gate_decision(one, base, 0.5, 1.15, max_degenerate_extra=1, max_repeating_extra=0)[0]
    empty = candidate | {"held_back_empty": 2.0, "held_back_live_empty": 0.0}
    assert gate_decision(empty, base, 0.5, 1.15, max_degenerate_extra=1)[1] == [
        "2 empty answers to 8 held-back prompts (live: 0, base: 0)"
    ]
    # Nothing held back (the first update of a lineage, an older record): nothing to check.
    assert gate_decision(loops | {"held_back_prompts": 0.0}, base, 0.5, 1.15)[0]
    assert gate_decision({"probe_kl": 0.0, "probe_ppl": 10.0}, base, 0.5, 1.15)[0]


def test_an_adapter_trained_to_loop_is_refused_on_the_users_own_prompts(
    prepared_model: Path, tmp_path: Path
) -> None:
    """The real model, taught to answer "Sure!" over and over: its greedy answers to prompts the
    update never saw loop, the base's and the live version's do not, and the gate says so."""
    tokenizer = AutoTokenizer.from_pretrained(str(prepared_model))
    loop = "Sure!\n\n" * 16
    questions = ("Name a fruit.", "What is rain?", "Say hello.", "Pick a colour.")
    train = [chat_sample(tokenizer, q, loop) for q in questions]
    others = ("What is snow?", "Name an animal.", "How far is the moon?")
    held_back = [chat_sample(tokenizer, q, "Sure! Here you go.") for q in others]
    *_, summary = train_and_probe(
        UpdateConfig(lr=3e-2, steps_per_batch=4, anchor_coef=0.0),  # deliberately too hard
        train,
        base_model_dir=prepared_model,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "loop",
        probe_prompts=PROBE_PROMPTS[:1],
        max_new_tokens=8,
        holdout=held_back,
    )
    probe, base = summary["probe"], summary["base_probe"]
    assert probe["held_back_prompts"] == 3
    assert base["held_back_repeating"] == probe["held_back_live_repeating"] == 0
    assert probe["held_back_repeating"] == 3, probe
    passed, reasons = gate_decision(probe, base, 100.0, 100.0, max_degenerate_extra=1)
    assert not passed and any("held-back prompts (live: 0, base: 0)" in r for r in reasons)


def test_a_change_of_mind_outranks_older_feedback_at_the_gate() -> None:
    """The gate's feedback rule: worse on the newest feedback (no version trained on it) is
    refused; older feedback, which earlier versions trained on, decides only when there is no
    newest (a batch under four): the user's newest word outranks what they said before."""
    base = {"probe_ppl": 10.0}
    fine = {"probe_kl": 0.01, "probe_ppl": 10.0}
    older_falls = fine | {"feedback_delta": -0.2, "feedback_samples": 8.0}

    def decide(metrics: dict[str, float]) -> tuple[bool, list[str]]:
        return gate_decision(metrics, base, 0.5, 1.15, max_feedback_drop=0.05)

    passed, [reason] = decide(older_falls)  # no fresh samples: the older ones decide
    assert not passed and reason.startswith("held-back feedback scores -0.2 nats/token")
    # a change of mind in the replay: the newest feedback flat, the older falling
    changed_mind = older_falls | {"fresh_feedback_delta": -0.001, "fresh_feedback_samples": 2.0}
    assert decide(changed_mind) == (True, [])
    newest_falls = fine | {"fresh_feedback_delta": -0.2, "fresh_feedback_samples": 2.0}
    passed, [reason] = decide(newest_falls | {"feedback_delta": 0.3, "feedback_samples": 8.0})
    assert not passed and reason.startswith("the newest feedback (2 samples")
    # a figure that is not a number never passes
    unknown = {"fresh_feedback_delta": math.nan, "fresh_feedback_samples": 2.0}
    assert decide(fine | unknown)[0] is False
    assert decide(fine | {"feedback_delta": math.nan, "feedback_samples": 8.0})[0] is False
