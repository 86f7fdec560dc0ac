"""Whose update goes next, among the lineages with a due batch and no update running.

Pure, so the webapp's scheduler (``webapp.learning.workflows.claiming``) and the many-people
benchmark read the same rule.

- A lineage whose feedback has waited longer than ``overdue_s`` goes first, the longest waiting
  first: nobody waits without bound behind others, whatever their order below.
- Then a lineage that has no version of its own yet: a newcomer's first version shows them that
  Parley learns from them, so it does not queue behind others' routine updates. Among
  newcomers, the one waiting longest.
- Then the lineage whose feedback has waited longest (a wait counted from its oldest feedback
  with a signal, or its last update where that is later), so one person's flood of feedback
  delays nobody by more than one update of theirs.

>>> waits = {
...     1: LineageWait(waited_s=300, has_version=True),
...     2: LineageWait(waited_s=30, has_version=False),
... }
>>> next_lineage(waits, overdue_s=600)  # 2 is new: their first version goes first
2
>>> waits[1] = LineageWait(waited_s=700, has_version=True)
>>> next_lineage(waits, overdue_s=600)  # 1 has waited past the bound
1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class LineageWait:
    """What the order needs of one lineage with a due batch."""

    waited_s: float
    """Seconds its feedback has waited (from its oldest sample with a signal, or its last
    update's start where that is later)."""

    has_version: bool
    """Whether it has ever had a version of its own live (the base model does not count)."""


def turn_key(wait: LineageWait, *, overdue_s: float) -> tuple[int, int, float]:
    """Sort key: smaller goes first (overdue, then newcomers, then the longest wait)."""
    overdue = wait.waited_s > overdue_s
    return (0 if overdue else 1, 0 if overdue or not wait.has_version else 1, -wait.waited_s)


def next_lineage(waits: Mapping[int | None, LineageWait], *, overdue_s: float) -> int | None:
    """The owner (a user id; None: the shared lineage) whose update goes next; None also when
    nobody is waiting. Ties go to the smaller id."""
    if not waits:
        return None
    return min(waits, key=lambda owner: (turn_key(waits[owner], overdue_s=overdue_s), owner or 0))
