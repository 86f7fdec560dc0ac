"""Fixtures tests share, loaded for every test by tests/conftest.py (``pytest_plugins``):
the users ``alice`` and ``bob``, and a recorder that stands in for the broker."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory


@pytest.fixture
def alice(db):
    return UserFactory(username="alice", password="wonderland-42")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob", password="builder-4242")


@pytest.fixture
def recorded_tasks(monkeypatch) -> list[tuple[str, object]]:
    """Tasks queued during the test, as (name, *arguments), recorded instead of sent."""
    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(
        "webapp.core.outbox.send", lambda task, args: sent.append((str(task), *args))
    )
    return sent


@pytest.fixture(autouse=True, scope="session")
def _forget_limit_counters() -> None:
    """Per-user counters in Redis outlive a test run (user ids restart with each test database):
    a run killed mid-answer must not leave the next run's users short of stream slots."""
    from django.conf import settings

    if not settings.REDIS_URL:
        return
    import redis

    try:
        broker = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
        for pattern in ("parley:ratelimit:*", "parley:streams:*", "parley:judging:*"):
            for name in broker.scan_iter(pattern):
                broker.delete(name)
    except (redis.RedisError, OSError):
        pass
