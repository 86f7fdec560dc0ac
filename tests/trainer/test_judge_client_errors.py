"""A judge that cannot answer now (5xx, 429, unreachable) is retried; one that refuses the
request (any other 4xx, e.g. a context too long) is not: the answer is recorded as unjudgeable."""

from __future__ import annotations

import httpx
import pytest

from trainer.judge_client import JudgeRejected, JudgeUnavailable, _texts

URL = "http://judge.invalid/v1/chat/completions"


def _response(status: int, body: dict | None = None) -> httpx.Response:
    return httpx.Response(status, json=body or {}, request=httpx.Request("POST", URL))


@pytest.mark.parametrize("status", [500, 503, 429, 408])
def test_server_errors_and_throttling_are_retryable(status: int) -> None:
    with pytest.raises(JudgeUnavailable):
        _texts(_response(status))


@pytest.mark.parametrize("status", [400, 404, 413, 422])
def test_a_refused_request_is_not_retryable(status: int) -> None:
    with pytest.raises(JudgeRejected, match=str(status)) as caught:
        _texts(_response(status, {"error": {"message": "maximum context length is 4096"}}))
    assert not isinstance(caught.value, JudgeUnavailable)
    assert "maximum context length" in str(caught.value)


def test_a_good_reply_is_read_in_index_order() -> None:
    body = {"choices": [{"index": 1, "message": {"content": "b"}}, {"index": 0, "message": {}}]}
    assert _texts(_response(200, body)) == ["", "b"]
