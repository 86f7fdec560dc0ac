"""Fixtures of the /v1 tests: a user's key, and the scripted model server behind /v1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from tests.webapp.api.openai_format import scripted_chunks
from webapp.api.keys import api_key_create


@pytest.fixture
def scripted(monkeypatch):
    calls: list[dict] = []

    async def fake_stream(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ) -> AsyncIterator[dict]:
        calls.append(
            {"messages": messages, "model": model, "params": params, "adapter": adapter_path}
        )
        for chunk in scripted_chunks("Hello there friend"):
            yield chunk

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    return calls


@pytest.fixture
def secret():
    user = get_user_model().objects.create_user("alice")
    return api_key_create(owner=user)[1]


@pytest.fixture
async def close_worker_thread_connections():
    """sync_to_async runs the ORM in a worker thread; close its connection so the test
    database can be dropped at the end of the run."""
    yield
    from django.db import connections

    await sync_to_async(connections.close_all)()
