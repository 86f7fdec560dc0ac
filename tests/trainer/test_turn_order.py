"""Whose update goes next (trainer.turn_order): overdue, then newcomers, then the longest wait."""

from __future__ import annotations

from trainer.turn_order import LineageWait, next_lineage


def _wait(seconds: float, *, has_version: bool = True) -> LineageWait:
    return LineageWait(waited_s=seconds, has_version=has_version)


def test_nobody_waiting_gives_nobody() -> None:
    assert next_lineage({}, overdue_s=600) is None


def test_a_newcomer_goes_before_longer_routine_waits() -> None:
    waits = {1: _wait(500), 2: _wait(400), 3: _wait(10, has_version=False)}
    assert next_lineage(waits, overdue_s=600) == 3


def test_the_longest_newcomer_goes_first_among_newcomers() -> None:
    waits = {1: _wait(20, has_version=False), 2: _wait(90, has_version=False), 3: _wait(500)}
    assert next_lineage(waits, overdue_s=600) == 2


def test_overdue_feedback_goes_before_newcomers_longest_first() -> None:
    waits = {1: _wait(700), 2: _wait(900), 3: _wait(599, has_version=False)}
    assert next_lineage(waits, overdue_s=600) == 2


def test_a_bound_of_zero_orders_by_wait_alone() -> None:
    waits = {1: _wait(30), 2: _wait(20, has_version=False)}
    assert next_lineage(waits, overdue_s=0) == 1


def test_ties_go_to_the_smaller_owner() -> None:
    assert next_lineage({5: _wait(50), 4: _wait(50)}, overdue_s=600) == 4


def test_the_module_examples_hold() -> None:
    import doctest

    import trainer.turn_order

    assert doctest.testmod(trainer.turn_order).failed == 0
