"""Fixtures of the learning tests: a broker stand-in for the training tests and a fake adapter
push (the real Redis broker and vLLM run in tests/integration)."""

from __future__ import annotations

import pytest

from tests.webapp.learning.updates import FakePush
from webapp.core.outbox import Task


@pytest.fixture
def no_broker(monkeypatch):
    """The ids of queued train_update tasks (other tasks are dropped)."""
    queued: list[int] = []

    def send(task, args):
        if task == Task.TRAIN_UPDATE:
            queued.extend(args)

    monkeypatch.setattr("webapp.core.outbox.send", send)
    return queued


@pytest.fixture
def pushed() -> FakePush:
    return FakePush()
