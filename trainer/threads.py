"""torch's threads on a host that training shares with serving.

torch's intra-op threads meet at every operator; one thread that loses its core to a busy
neighbour (the serving engine writing a chat's answer) holds up all of them. On 2 cores with
the llama.cpp engine streaming to 4 clients, an update at torch's default of 2 threads ran its
optimizer steps at a few training tokens a second where one thread keeps most of its quiet pace
(``python -m bench.train_under_load``). So training takes the cores serving leaves it, split
among the train workers, and never fewer than one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def threads_left_by_serving(*, cores: int, serving_threads: int, train_workers: int = 1) -> int:
    """Each train worker's share of the cores the serving engine does not use.

    >>> threads_left_by_serving(cores=2, serving_threads=1)
    1
    >>> threads_left_by_serving(cores=16, serving_threads=8, train_workers=2)
    4
    >>> threads_left_by_serving(cores=2, serving_threads=2, train_workers=3)
    1
    """
    return max(1, (cores - serving_threads) // max(1, train_workers))


def train_threads(setting: int, *, serving_threads: int, train_workers: int) -> int:
    """A train worker's threads: ``setting`` (``PARLEY_TRAIN_THREADS``) where it is above 0,
    else its share of the cores serving leaves; ``serving_threads`` 0 means serving's default,
    half the cores (``PARLEY_SERVE_THREADS``).

    >>> train_threads(3, serving_threads=0, train_workers=1)
    3
    >>> train_threads(0, serving_threads=os.cpu_count() or 1, train_workers=1)
    1
    """
    if setting > 0:
        return setting
    cores = os.cpu_count() or 1
    return threads_left_by_serving(
        cores=cores,
        serving_threads=serving_threads or max(1, cores // 2),
        train_workers=train_workers,
    )


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` (0: unchanged) for the block, then restored."""
    import torch

    previous = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
