"""The users tests share, loaded for every test by tests/conftest.py (``pytest_plugins``)."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory


@pytest.fixture
def alice(db):
    return UserFactory(username="alice", password="wonderland-42")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob", password="builder-4242")
