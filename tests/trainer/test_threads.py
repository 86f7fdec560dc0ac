"""torch's threads beside serving (trainer.threads)."""

from __future__ import annotations

import torch

from trainer.threads import threads_left_by_serving, torch_threads


def test_training_takes_the_cores_serving_leaves_split_among_workers() -> None:
    assert threads_left_by_serving(cores=2, serving_threads=1) == 1
    assert threads_left_by_serving(cores=32, serving_threads=16, train_workers=4) == 4


def test_training_keeps_one_thread_however_busy_the_host() -> None:
    assert threads_left_by_serving(cores=1, serving_threads=1) == 1
    assert threads_left_by_serving(cores=4, serving_threads=8, train_workers=2) == 1


def test_torch_threads_are_set_for_the_block_and_restored_after() -> None:
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with torch_threads(0):
        assert torch.get_num_threads() == before


def test_the_module_examples_hold() -> None:
    import doctest

    import trainer.threads

    assert doctest.testmod(trainer.threads).failed == 0


def test_a_setting_above_zero_is_taken_as_it_is() -> None:
    from trainer.threads import train_threads

    assert train_threads(3, serving_threads=1, train_workers=4) == 3
    assert train_threads(0, serving_threads=64, train_workers=1) == 1
