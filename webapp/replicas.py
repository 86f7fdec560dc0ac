"""Which serving replica answers whom: a lineage's home, by rendezvous hashing.

Each person's adapter lives on one replica of ``VLLM_BASE_URLS`` — their lineage's *home* —
instead of on all of them, so N replicas hold N times as many people's adapters between them
as one does. The home is the first replica of the lineage's order: the replicas sorted by a
hash of (lineage key, replica URL), highest first (rendezvous, or highest-random-weight,
hashing). Every process computes the same order with no shared state, a lineage keeps its
home while the list stays the same, and adding a replica moves only the lineages whose
highest weight is the new one's (about 1/N of them); removing one moves only its own.

When the home does not answer, the next replica of the same order takes the request (and
loads the adapter on first use), so each lineage has one fallback as stable as its home. A
replica that did not answer is remembered as down for ``DOWN_FOR_S`` and tried last meanwhile,
so a dead replica costs one refused connection per process, not one per request.

The shared lineage (``SHARED_LINEAGE``: the shared adapter and the base model) answers
everyone who has no adapter of their own, so it lives on every replica: its requests are
spread over all of them in turn rather than sent to one.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Iterator, Sequence

from django.conf import settings

SHARED_LINEAGE = "shared"
"""The lineage key of the shared lineage (policy versions without an owner) and the base."""

DOWN_FOR_S = 10.0
"""How long a replica that refused a connection is tried last: long enough that a dead replica
is not knocked on by every request, short enough that a restarted one is back within seconds."""


def lineage_key(owner_id: int | None) -> str:
    """The key a lineage is routed by: its owner's id, or ``SHARED_LINEAGE`` for no owner."""
    return SHARED_LINEAGE if owner_id is None else f"user-{owner_id}"


def _weight(key: str, replica: str) -> int:
    digest = hashlib.blake2b(f"{key}\n{replica}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous_order(key: str, replicas: Sequence[str]) -> list[str]:
    """The replicas in ``key``'s order: its home first, then where it falls back, in turn.

    >>> rendezvous_order("user-7", ["http://a/v1", "http://b/v1"])
    ['http://b/v1', 'http://a/v1']
    """
    return sorted(replicas, key=lambda replica: (-_weight(key, replica), replica))


class DownReplicas:
    """Replicas that did not answer lately, each until ``for_s`` after it last failed."""

    def __init__(self, *, for_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.for_s = for_s
        self.clock = clock
        self._until: dict[str, float] = {}

    def mark(self, replica: str) -> None:
        self._until[replica] = self.clock() + self.for_s

    def is_down(self, replica: str) -> bool:
        until = self._until.get(replica)
        if until is None:
            return False
        if until <= self.clock():
            del self._until[replica]
            return False
        return True

    def last(self, order: Sequence[str]) -> list[str]:
        """``order`` with the replicas that are down moved to its end (each part in order):
        when every replica is down, each is still tried."""
        up = [replica for replica in order if not self.is_down(replica)]
        return up + [replica for replica in order if replica not in up]


down = DownReplicas(for_s=DOWN_FOR_S)
"""This process's memory of replicas that did not answer (the web server's, a worker's)."""

_turns: Iterator[int] = itertools.count()


def replica_order(lineage: str | None) -> list[str]:
    """The replicas of ``VLLM_BASE_URLS`` in the order to try them for a request of
    ``lineage``: its rendezvous order; for the shared lineage (or None) the next replica in
    turn, then the others. Replicas remembered as down come last."""
    replicas = list(settings.VLLM_BASE_URLS)
    if lineage is None or lineage == SHARED_LINEAGE:
        start = next(_turns) % len(replicas)
        order = replicas[start:] + replicas[:start]
    else:
        order = rendezvous_order(lineage, replicas)
    return down.last(order)
