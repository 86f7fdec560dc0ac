"""What happens to feedback whose update the probe gate refused: it is never lost.

A refused update gives its samples back, one refusal more each. The next update that trains
them takes a smaller step (the learning rate times ``factor`` per refusal of the most-refused
sample in its batch), so an update refused for moving too far or breaking the model is tried
again more gently. A sample refused ``max_refusals`` times is excluded, with the gate's
reasons. The webapp (``workflows.claiming``) keeps the counts in the database and the
offline replay (``bench.replay``) in memory; both decide with these two functions and these
defaults. One difference stays: the webapp trains the oldest ready samples first, at most a
batch, while the replay trains the given-back samples together with the next batch (so
nothing waits a version, and that batch's new samples take the smaller step too).
"""

from __future__ import annotations

from collections.abc import Iterable

REFUSAL_LR_FACTOR = 0.5
"""The default step factor per refusal (the webapp's ``PARLEY_TRAIN_REFUSAL_LR_FACTOR``)."""
MAX_REFUSALS = 3
"""The default refusals before a sample is excluded (``PARLEY_TRAIN_MAX_REFUSALS``)."""


def backed_off_lr(lr: float, *, refusals: Iterable[int], factor: float) -> float:
    """The learning rate for a batch whose samples were refused ``refusals`` times each.

    >>> backed_off_lr(1e-3, refusals=[0, 2, 1], factor=0.5)
    0.00025
    >>> backed_off_lr(1e-3, refusals=[], factor=0.5)
    0.001
    """
    return lr * factor ** max(refusals, default=0)


def is_excluded(refusals: int, *, max_refusals: int) -> bool:
    """A sample refused this many times is trained no more.

    >>> is_excluded(2, max_refusals=3), is_excluded(3, max_refusals=3)
    (False, True)
    """
    return refusals >= max_refusals
