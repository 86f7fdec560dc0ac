"""Which feedback an update trains, which it leaves for the gate, and when an update is due.

The one statement of these rules: the webapp's claim (``webapp.learning.workflows.claiming``)
applies them to the rows it reads from PostgreSQL, the offline replay (``bench.replay``) to the
samples it keeps in memory. Pure Python over ``Candidate``s, listed oldest first.

- A sample has a *sign* when it carries a reward or a correction (the gate can score a
  candidate on it), a *signal* when it has a sign or a hint (it can move the model). A
  conversation closed without feedback leaves a sample with neither: it never makes a batch
  due and never takes the place of one with a signal.
- A batch is due when samples with a signal fill it or the oldest of them has waited
  ``max_wait_s``; never without one.
- The batch: samples with a signal first, then the oldest first, at most ``batch_size``; a
  group (answers to one prompt, compared with each other) is taken whole or waits, also when
  one of its samples is left fresh.
- Fresh feedback: the ``fresh`` newest signed samples are left for the next update, when at
  least four times as many with a signal are ready, so the gate scores the candidate on
  feedback no version has trained on. Never one the previous update left fresh (no sample waits
  longer than one update).
- Held back: the ``holdout`` most recent signed samples outside the batch, outside the fresh
  ones and outside the batch that trained the live version (which has just fitted those).

>>> ready = [Candidate(key=n, signed=True, signal=True) for n in range(8)]
>>> choice = claim(ready, rules=ClaimRules(batch_size=8, fresh=2))
>>> choice.batch, choice.fresh
([0, 1, 2, 3, 4, 5], [7, 6])
>>> holdout_choice(ready, exclude={*choice.batch, *choice.fresh}, limit=8)
[]
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ClaimRules:
    """The numbers the rules run with (the webapp's ``PARLEY_TRAIN_*`` / ``PARLEY_GATE_*``
    settings default to these)."""

    batch_size: int = 8
    """Most samples one update trains (``PARLEY_TRAIN_BATCH_SIZE``)."""

    max_wait_s: float = 600.0
    """An update is due once the oldest sample with a signal has waited this long, however
    few there are (``PARLEY_TRAIN_MAX_WAIT_S``)."""

    fresh: int = 2
    """Newest signed samples each update leaves for the next one's gate
    (``PARLEY_GATE_FRESH_SAMPLES``; 0: none)."""

    holdout: int = 8
    """Recent signed samples outside the update that its gate also scores
    (``PARLEY_GATE_HOLDOUT_SAMPLES``; 0: none)."""


@dataclass(frozen=True)
class Candidate:
    """What the rules need to know of one sample; ``key`` names it to the caller."""

    key: Any
    signed: bool
    signal: bool
    group: Any = None
    """Answers to one prompt that train together (a 👎 and the answers sampled beside it)."""


@dataclass(frozen=True)
class Claim:
    """An update's choice: what it trains and what it leaves fresh for the next one."""

    batch: list[Any] = field(default_factory=list)
    fresh: list[Any] = field(default_factory=list)


def is_signed(*, reward: float | None, correction: object) -> bool:
    """A reward or a correction: the gate can score a candidate on the sample.

    >>> is_signed(reward=-1.0, correction=""), is_signed(reward=0.0, correction="")
    (True, False)
    """
    return bool(reward) or bool(correction)


def has_signal(*, reward: float | None, hint: object, correction: object) -> bool:
    """A reward, a hint or a correction: the sample can move the model.

    >>> has_signal(reward=0.0, hint="Answer in metric units.", correction="")
    True
    """
    return is_signed(reward=reward, correction=correction) or bool(hint)


def is_bare_dislike(*, reward: float | None, hint: object, correction: object) -> bool:
    """A −1 with nothing said (no hint, no correction): the answers sampled beside it give it
    something to be compared with (a group).

    >>> is_bare_dislike(reward=-1.0, hint="", correction=""), is_bare_dislike(
    ...     reward=-1.0, hint="Shorter.", correction="")
    (True, False)
    """
    return reward is not None and reward < 0 and not hint and not correction


def is_due(*, signal: int, oldest_wait_s: float, rules: ClaimRules, force: bool = False) -> bool:
    """An update is due: samples with a signal fill a batch, the oldest has waited long
    enough, or ``force``; never without a sample with a signal (it would train nothing).

    >>> is_due(signal=3, oldest_wait_s=10, rules=ClaimRules())
    False
    >>> is_due(signal=3, oldest_wait_s=601, rules=ClaimRules())
    True
    >>> is_due(signal=0, oldest_wait_s=1e9, rules=ClaimRules(), force=True)
    False
    """
    if signal <= 0:
        return False
    return force or signal >= rules.batch_size or oldest_wait_s >= rules.max_wait_s


def _groups(candidates: Sequence[Candidate]) -> dict[Any, list[Candidate]]:
    members: dict[Any, list[Candidate]] = {}
    for candidate in candidates:
        if candidate.group is not None:
            members.setdefault(candidate.group, []).append(candidate)
    return members


def batch_choice(
    ready: Sequence[Candidate], *, size: int | None, leaving: Collection[Any] = ()
) -> list[Any]:
    """The batch: samples with a signal first, then the oldest first, at most ``size``
    (None: all), none of ``leaving``. A group comes whole, when its first member's turn
    comes; one that does not fit in what is left waits (a batch of one group takes it all).

    >>> a, b = Candidate("a", True, True, group=1), Candidate("b", False, False, group=1)
    >>> batch_choice([Candidate("x", True, True), a, Candidate("y", False, False), b], size=3)
    ['x', 'a', 'b']
    """
    # A group one of whose members is left out (fresh) waits whole.
    left = {c.group for c in ready if c.key in leaving and c.group is not None}
    kept = [c for c in ready if c.key not in leaving and (c.group is None or c.group not in left)]
    ordered = [c for c in kept if c.signal] + [c for c in kept if not c.signal]
    members = _groups(kept)
    chosen: list[Any] = []
    for candidate in ordered:
        if candidate.key in chosen:
            continue
        unit = members[candidate.group] if candidate.group is not None else [candidate]
        if size is not None and chosen and len(chosen) + len(unit) > size:
            continue
        chosen += [c.key for c in unit]
        if size is not None and len(chosen) >= size:
            break
    return chosen


def fresh_choice(
    ready: Sequence[Candidate], *, count: int, left_before: Collection[Any] = ()
) -> list[Any]:
    """The ``count`` newest signed samples, newest first, when at least four times as many
    with a signal are ready (else none: a small batch trains whole and the check is never left
    to one sample's word); never one the previous update left fresh (``left_before``). The
    batch leaves the rest of a fresh sample's group waiting with it (``batch_choice``)."""
    if count <= 0 or sum(c.signal for c in ready) < 4 * count:
        return []
    newest = [c.key for c in reversed(ready) if c.signed and c.key not in left_before]
    return newest[:count]


def claim(
    ready: Sequence[Candidate],
    *,
    rules: ClaimRules,
    left_before: Collection[Any] = (),
    size: int | None = -1,
) -> Claim:
    """The batch and the fresh samples of one update over ``ready`` (oldest first).

    ``size`` defaults to ``rules.batch_size``; None trains every ready sample but the fresh
    ones (the replay's choice: nothing waits a version but those)."""
    limit = rules.batch_size if size == -1 else size
    fresh = fresh_choice(ready, count=rules.fresh, left_before=left_before)
    # Fresh ones are taken only when four times as many carry a signal, and the batch takes
    # those first: it is never left without one.
    return Claim(batch=batch_choice(ready, size=limit, leaving=fresh), fresh=fresh)


def holdout_choice(
    on_record: Sequence[Candidate], *, exclude: Collection[Any], limit: int
) -> list[Any]:
    """The ``limit`` most recent signed samples of ``on_record`` (oldest first), newest
    first, none of ``exclude`` (the batch, the fresh ones, the live version's batch)."""
    if limit <= 0:
        return []
    newest = [c.key for c in reversed(on_record) if c.signed and c.key not in exclude]
    return newest[:limit]
