"""Sampling for the llama.cpp engine: the log-prob returned is the one of the distribution the
token was drawn from, which the trainer's importance weights divide by."""

from __future__ import annotations

import numpy as np
import pytest

from webapp.infra.sampling import Sampling, sample


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


LOGITS = np.array([2.0, 1.0, 0.5, -1.0, -3.0], dtype=np.float32)


def test_greedy_takes_the_most_likely_token_with_its_plain_log_softmax() -> None:
    token = sample(LOGITS, Sampling(max_tokens=1, temperature=0), np.random.default_rng(0))
    assert token.id == 0
    assert token.logprob == pytest.approx(_log_softmax(LOGITS.astype(np.float64))[0])


def test_temperature_scales_the_reported_log_prob() -> None:
    rng = np.random.default_rng(0)
    token = sample(LOGITS, Sampling(max_tokens=1, temperature=0.5), rng)
    assert token.logprob == pytest.approx(_log_softmax(LOGITS / 0.5)[token.id])


def test_draws_follow_the_reported_distribution() -> None:
    rng = np.random.default_rng(1)
    settings = Sampling(max_tokens=1, temperature=0.8)
    draws = [sample(LOGITS, settings, rng) for _ in range(4000)]
    counts = np.bincount([d.id for d in draws], minlength=LOGITS.size) / len(draws)
    expected = np.exp(_log_softmax(LOGITS / 0.8))
    assert np.abs(counts - expected).max() < 0.03
    for draw in draws[:50]:
        assert draw.logprob == pytest.approx(np.log(expected[draw.id]))


def test_top_k_and_top_p_renormalise_over_what_is_left() -> None:
    rng = np.random.default_rng(2)
    top_k = {sample(LOGITS, Sampling(max_tokens=1, top_k=2), rng).id for _ in range(300)}
    assert top_k == {0, 1}
    token = sample(LOGITS, Sampling(max_tokens=1, top_k=2), rng)
    assert token.logprob == pytest.approx(_log_softmax(LOGITS[:2].astype(np.float64))[token.id])
    # 0.6 of the mass lies in the first token alone: top_p 0.5 keeps just it.
    only = sample(LOGITS, Sampling(max_tokens=1, top_p=0.5), rng)
    assert (only.id, only.logprob) == (0, pytest.approx(0.0))


def test_min_p_drops_tokens_far_below_the_best() -> None:
    rng = np.random.default_rng(3)
    seen = {sample(LOGITS, Sampling(max_tokens=1, min_p=0.3), rng).id for _ in range(300)}
    assert seen == {0, 1}  # e^-1 = 0.37 of the best stays, e^-1.5 = 0.22 goes


def test_penalties_and_bias_move_the_logits_before_sampling() -> None:
    greedy = Sampling(max_tokens=1, temperature=0, frequency_penalty=2.0)
    rng = np.random.default_rng(0)
    assert sample(LOGITS, greedy, rng, prompt=[], output=[0]).id == 1
    repeat = Sampling(max_tokens=1, temperature=0, repetition_penalty=3.0)
    assert sample(LOGITS, repeat, rng, prompt=[0], output=[]).id == 1  # 2.0 / 3 < 1.0
    biased = Sampling(max_tokens=1, temperature=0, logit_bias={4: 10.0})
    assert sample(LOGITS, biased, rng).id == 4


def test_a_seed_repeats_the_draws_and_top_logprobs_are_ordered() -> None:
    settings = Sampling(max_tokens=1, temperature=1.0, top_logprobs=3)
    first = [sample(LOGITS, settings, np.random.default_rng(7)).id for _ in range(5)]
    again = [sample(LOGITS, settings, np.random.default_rng(7)).id for _ in range(5)]
    assert first == again
    top = sample(LOGITS, settings, np.random.default_rng(7)).top
    assert [i for i, _ in top] == [0, 1, 2]
    assert top[0][1] > top[1][1] > top[2][1]


def test_a_guided_choice_keeps_the_answer_on_one_of_its_sequences() -> None:
    guided = Sampling(max_tokens=3, temperature=1.0, choices=[[3, 1], [3, 2], [4]])
    eos = {0}
    assert guided.allowed([], eos) == [3, 4]
    assert guided.allowed([3], eos) == [1, 2]
    assert guided.allowed([3, 2], eos) == [0]  # a whole choice: only the end may follow
    assert guided.allowed([9], eos) == [0]
    assert Sampling(max_tokens=1).allowed([], eos) is None
    rng = np.random.default_rng(0)
    drawn = {sample(LOGITS, guided, rng, allowed=[3, 4]).id for _ in range(200)}
    assert drawn == {3, 4}  # the two least likely tokens, the only ones allowed
    token = sample(LOGITS, guided, rng, allowed=[3, 4])
    assert token.logprob == pytest.approx(
        _log_softmax(LOGITS[[3, 4]].astype(np.float64))[token.id - 3]
    )
