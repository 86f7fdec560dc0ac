"""The load benchmark (bench/load.py) in CI size, on the running stack: users chatting in the
browser's websocket and through /v1, feedback after every answer, publishes in between."""

from __future__ import annotations

import pytest

from bench.load import make_adapter, run_load

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]


def test_concurrent_users_while_publishing_lose_nothing(stack, stack_api_key) -> None:
    make_adapter(stack.var_dir, stack.manage)
    figures = run_load(
        web_url=stack.web_url,
        api_key=stack_api_key,
        var_dir=stack.var_dir,
        manage=stack.manage,
        users=6,
        rounds=2,
        max_tokens=8,
        publishes=2,
    )
    print(figures)
    assert figures["failures"] == 0, figures["failure_reasons"]
    assert figures["requests"] == 12
    assert figures["feedback_sent"] == 12
    assert figures["feedback_stored_once"] == 12
    assert not figures["feedback_missing"] and not figures["feedback_duplicated"]
    assert not figures["feedback_unexpected"]
    assert figures["answers_by_status"] == {"complete": 12}
    assert figures["publishes"] >= 1
    assert 0 < figures["p50_s"] <= figures["p99_s"]
