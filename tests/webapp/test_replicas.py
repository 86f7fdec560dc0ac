"""Which replica answers whom: rendezvous order by lineage, fallback, replicas remembered down.

Pure: no database, no network.
"""

from __future__ import annotations

from collections import Counter

import pytest

from webapp import replicas
from webapp.replicas import DownReplicas, lineage_key, rendezvous_order, replica_order

FOUR = [f"http://vllm-{i}:8001/v1" for i in range(4)]
KEYS = [lineage_key(owner_id) for owner_id in range(1, 4001)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def nothing_down(monkeypatch) -> DownReplicas:
    fresh = DownReplicas(for_s=replicas.DOWN_FOR_S)
    monkeypatch.setattr(replicas, "down", fresh)
    return fresh


def test_the_order_is_the_same_every_time_and_whatever_order_the_replicas_are_listed_in() -> None:
    for key in KEYS[:200]:
        order = rendezvous_order(key, FOUR)
        assert sorted(order) == sorted(FOUR)
        assert rendezvous_order(key, FOUR) == order
        assert rendezvous_order(key, list(reversed(FOUR))) == order


def test_lineages_spread_evenly_over_the_replicas() -> None:
    homes = Counter(rendezvous_order(key, FOUR)[0] for key in KEYS)
    assert set(homes) == set(FOUR)
    expected = len(KEYS) / len(FOUR)
    assert all(abs(count - expected) < 0.1 * expected for count in homes.values()), homes


def test_a_lineage_falls_back_to_a_replica_that_depends_on_the_lineage() -> None:
    """When a home goes down its lineages spread over the others, not all onto one."""
    fallbacks = Counter(
        order[1] for key in KEYS if (order := rendezvous_order(key, FOUR))[0] == FOUR[0]
    )
    assert set(fallbacks) == set(FOUR[1:])


def test_adding_a_replica_moves_about_one_lineage_in_n_and_only_onto_the_new_one() -> None:
    five = [*FOUR, "http://vllm-new:8001/v1"]
    before = {key: rendezvous_order(key, FOUR)[0] for key in KEYS}
    after = {key: rendezvous_order(key, five)[0] for key in KEYS}
    moved = [key for key in KEYS if before[key] != after[key]]
    assert {after[key] for key in moved} == {five[-1]}
    assert abs(len(moved) / len(KEYS) - 1 / 5) < 0.03, len(moved)


def test_removing_a_replica_moves_only_its_own_lineages() -> None:
    three = FOUR[:3]
    for key in KEYS[:1000]:
        home = rendezvous_order(key, FOUR)[0]
        if home in three:
            assert rendezvous_order(key, three)[0] == home
        else:
            assert rendezvous_order(key, three)[0] == rendezvous_order(key, FOUR)[1]


def test_a_replica_that_did_not_answer_is_tried_last_for_a_while(settings, nothing_down) -> None:
    clock = Clock()
    nothing_down.clock = clock
    settings.VLLM_BASE_URLS = FOUR
    key = KEYS[0]
    order = rendezvous_order(key, FOUR)
    nothing_down.mark(order[0])
    assert replica_order(key) == [*order[1:], order[0]]
    clock.now += replicas.DOWN_FOR_S + 0.1
    assert replica_order(key) == order


def test_when_every_replica_is_down_each_is_still_tried_in_the_lineages_order(
    settings, nothing_down
) -> None:
    settings.VLLM_BASE_URLS = FOUR
    for replica in FOUR:
        nothing_down.mark(replica)
    assert replica_order(KEYS[3]) == rendezvous_order(KEYS[3], FOUR)


def test_the_shared_lineage_is_spread_over_every_replica_in_turn(settings) -> None:
    """It answers everyone without an adapter of their own, so it lives on every replica."""
    settings.VLLM_BASE_URLS = FOUR
    firsts = [replica_order(lineage_key(None))[0] for _ in range(8)]
    assert Counter(firsts) == Counter({replica: 2 for replica in FOUR})
    assert all(sorted(replica_order(None)) == sorted(FOUR) for _ in range(4))


def test_lineage_keys_name_the_owner_or_the_shared_lineage() -> None:
    assert lineage_key(7) == "user-7"
    assert lineage_key(None) == replicas.SHARED_LINEAGE
