"""Request size: capped ``max_tokens`` and ``n``, parameters stored once per turn, bounded
feedback history (issue 17, "Resource abuse")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import AsyncClient

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory, UserFactory
from webapp.api.errors import ApiError
from webapp.api.keys import api_key_create
from webapp.api.schemas import parse_chat_request
from webapp.chat.feedback import feedback_rate
from webapp.chat.models import Feedback, Message

USER = [{"role": "user", "content": "hi"}]


def _refused(body: dict) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_chat_request(body)
    return caught.value


def test_max_tokens_above_the_cap_is_a_400_naming_the_field(settings) -> None:
    settings.API_MAX_TOKENS = 100
    assert parse_chat_request({"model": "p", "messages": USER, "max_tokens": 100}).params == {
        "max_tokens": 100
    }
    for field in ("max_tokens", "max_completion_tokens"):
        error = _refused({"model": "p", "messages": USER, field: 101})
        assert (error.status, error.param, error.code) == (400, field, "invalid_value")
        assert "100" in error.message


def test_n_above_the_cap_is_a_400_naming_the_field(settings) -> None:
    settings.API_MAX_N = 2
    assert parse_chat_request({"model": "p", "messages": USER, "n": 2}).n == 2
    error = _refused({"model": "p", "messages": USER, "n": 3})
    assert (error.status, error.param) == (400, "n")


def _chunks(n: int) -> list[dict]:
    first = {
        "id": "x",
        "created": 1,
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {"index": i, "delta": {"role": "assistant", "content": "ok"}} for i in range(n)
        ],
    }
    last = {
        "id": "x",
        "created": 1,
        "choices": [{"index": i, "delta": {}, "finish_reason": "stop"} for i in range(n)],
    }
    return [first, last]


def _table_bytes() -> int:
    """Bytes of the message table's rows as PostgreSQL stores them (JSON uncompressed)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(octet_length(sampling_params::text)), 0) FROM chat_message"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
async def test_a_requests_parameters_are_stored_once_however_many_answers(
    monkeypatch, settings
) -> None:
    settings.API_MAX_N = 8
    settings.API_MAX_BODY_BYTES = 8 * 1024 * 1024

    async def fake_stream(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ) -> AsyncIterator[dict]:
        for chunk in _chunks(int((params or {}).get("n") or 1)):
            yield chunk

    monkeypatch.setattr("webapp.api.completions.stream_chat", fake_stream)
    user = await sync_to_async(UserFactory)(username="flood")
    _, secret = await sync_to_async(api_key_create)(owner=user)
    # ~1 MB of tool definitions: what a client can legally send, and what vLLM is asked with.
    description = "d" * 1_000_000
    body = {
        "model": "parley",
        "messages": USER,
        "n": 8,
        "tools": [{"type": "function", "function": {"name": "f", "description": description}}],
    }
    response = await AsyncClient().post(
        "/v1/chat/completions",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200, response.content[:300]
    assert len(json.loads(response.content)["choices"]) == 8
    stored = await sync_to_async(_table_bytes)()
    # Once (plus a few bytes per sibling), not eight times.
    assert 1_000_000 < stored < 1_100_000, stored
    answers = await sync_to_async(list)(
        Message.objects.filter(role="assistant").order_by("completion_id")
    )
    assert len(answers) == 8
    first = answers[0]
    assert first.sampling_params["n"] == 8 and first.sampling_params["tools"]
    for sibling in answers[1:]:
        assert sibling.sampling_params == {"same_as": first.pk}
    from django.db import connections

    await sync_to_async(connections.close_all)()


@pytest.mark.django_db
def test_feedback_history_keeps_only_the_last_entries(settings) -> None:
    settings.FEEDBACK_HISTORY_MAX = 5
    user = UserFactory(username="clicker")
    question = QuestionFactory(conversation=ConversationFactory(owner=user))
    answer = AnswerFactory(parent=question)
    for i in range(12):
        feedback_rate(message=answer, author=user, rating=1 if i % 2 else -1)
    feedback = Feedback.objects.get(message=answer, author=user)
    assert len(feedback.history) == 5
    # The newest earlier states are kept: those after clicks 6 to 10.
    assert [state["rating"] for state in feedback.history] == [-1, 1, -1, 1, -1]
