"""Per-sample advantages from rewards: groups, running or batch baseline, algorithm signals."""

from __future__ import annotations

import pytest
import torch

from trainer.advantages import reward_advantages, token_advantages
from trainer.batch import Sample
from trainer.config import UpdateConfig


def _sample(reward: float | None, group: str | None = None) -> Sample:
    return Sample([1], [2, 3], [-1.0, -1.0], reward=reward, group_id=group)


def test_siblings_in_a_group_are_normalised_and_singles_keep_their_reward_without_a_baseline() -> (
    None
):
    samples = [
        _sample(1.0, "g"),
        _sample(-1.0, "g"),
        _sample(1.0, "g"),
        _sample(-1.0),
        _sample(None, "g"),
        _sample(1.0, "lonely"),
    ]
    advantages, _ = reward_advantages(UpdateConfig(batch_baseline=False), samples)
    assert sum(advantages[:3]) == pytest.approx(0.0, abs=1e-6)
    assert advantages[0] > 0 > advantages[1]
    assert advantages[3:] == [-1.0, 0.0, 1.0]  # a group of one is just a reward


def test_running_baseline_applies_to_singles_and_carries_over() -> None:
    config = UpdateConfig(
        batch_baseline=False, use_running_baseline=True, initial_baseline=0.5, baseline_momentum=0.5
    )
    advantages, baseline = reward_advantages(config, [_sample(1.0), _sample(-1.0)])
    assert advantages == [0.5, -1.75]
    assert baseline == pytest.approx(-0.125)


def test_batch_baseline_centres_the_singles_and_leaves_groups_alone() -> None:
    config = UpdateConfig(batch_baseline=True, initial_baseline=0.25)
    samples = [
        _sample(1.0),
        _sample(1.0),
        _sample(None),  # no reward: not in the mean, no advantage
        _sample(-1.0),
        _sample(1.0, "g"),
        _sample(-1.0, "g"),
    ]
    advantages, baseline = reward_advantages(config, samples)
    assert advantages[:4] == pytest.approx([2 / 3, 2 / 3, 0.0, -4 / 3])
    plain, _ = reward_advantages(UpdateConfig(), samples)
    assert advantages[4:] == pytest.approx(plain[4:])  # the group is normalised on its own
    assert baseline == 0.25  # nothing carried over
    liked, _ = reward_advantages(config, [_sample(1.0)] * 8)
    assert liked == [0.0] * 8  # every answer liked: no reward signal left to sharpen on
    disliked, _ = reward_advantages(config, [_sample(-1.0)] * 8)
    assert disliked == [0.0] * 8
    mostly_liked, _ = reward_advantages(config, [_sample(1.0)] * 7 + [_sample(-1.0)])
    assert mostly_liked[-1] == pytest.approx(-1.75)


def test_batch_and_running_baselines_are_not_both_taken() -> None:
    with pytest.raises(ValueError, match="set batch_baseline=false"):
        UpdateConfig(batch_baseline=True, use_running_baseline=True)


def test_token_advantages_combine_reward_and_teacher_gap_per_row() -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    teacher = torch.tensor([[-1.0, -1.0, 0.0], [-1.0, -2.0, -3.0]])
    old = torch.full((2, 3), -2.0)
    config = UpdateConfig(w_rl=2.0, w_opd=0.5)
    advantages = token_advantages(
        config,
        torch.tensor([1.0, -1.0]),
        teacher,
        old,
        mask,
        uses_rl_B=torch.tensor([True, False]),
        uses_opd_B=torch.tensor([True, True]),
    )
    assert advantages.tolist() == [[2.5, 2.5, 0.0], [0.5, 0.0, -0.5]]


def test_the_batch_baseline_is_the_default_and_an_all_disliked_batch_carries_no_reward() -> None:
    """After a change of mind every answer misses: the reward term then pushes nothing down
    (the corrections and hints lead), which kept answers from emptying in the replay's long run."""
    advantages, _ = reward_advantages(UpdateConfig(), [_sample(-1.0) for _ in range(4)])
    assert UpdateConfig().batch_baseline and advantages == [0.0] * 4


def test_a_disliked_answer_with_the_answers_sampled_beside_it_moves_away_from_it() -> None:
    """A bare 👎 and the unseen answers to its prompt (reward 0, one group): the disliked answer
    goes down and the others up by as much, at the defaults, where alone it would carry 0."""
    group = [_sample(-1.0, "p"), *(_sample(0.0, "p") for _ in range(3))]
    advantages, _ = reward_advantages(UpdateConfig(), [*group, _sample(-1.0), _sample(-1.0)])
    disliked, *others = advantages[:4]
    assert disliked < 0 and all(a > 0 for a in others)
    assert sum(advantages[:4]) == pytest.approx(0.0, abs=1e-6)
    assert advantages[4:] == [0.0, 0.0]  # the two 👎 alone still carry nothing
