"""The OpenClaw check's own parts, without the client: the config the README and the docs give
is the one the check runs, the proxy reads requests and answers as OpenClaw sends and gets
them, and a session's failures are named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.openclaw_check import CheckReport, _check_client_side, _reworked_answers
from bench.openclaw_client import Profile, TurnResult, provider_config, reply_text
from bench.openclaw_proxy import Exchange, describe_answer, describe_request

ROOT = Path(__file__).resolve().parents[2]


def _json_block_after(text: str, heading: str) -> dict:
    rest = text[text.index(heading) :]
    return json.loads(re.search(r"```json\n(.*?)```", rest, re.DOTALL).group(1))


@pytest.mark.parametrize(
    ("page", "heading"), [("README.md", "### OpenClaw"), ("docs/openclaw.md", "## The config")]
)
def test_the_documented_openclaw_config_is_the_one_the_check_runs(page, heading) -> None:
    documented = _json_block_after((ROOT / page).read_text(), heading)
    checked = provider_config(base_url="http://127.0.0.1:8000", api_key="pk-…", profile=Profile())
    assert documented == checked


def test_the_slim_profile_fits_the_served_window_and_the_full_one_is_openclaws_default() -> None:
    slim = provider_config(base_url="http://h", api_key="k", profile=Profile())
    full = provider_config(base_url="http://h", api_key="k", profile=Profile("full"))
    model = slim["models"]["providers"]["parley"]["models"][0]
    assert (model["contextWindow"], model["maxTokens"]) == (8192, 256)
    assert slim["tools"]["allow"] == ["read", "exec"]
    assert set(full) == {"models", "agents"}  # nothing of OpenClaw's agent turned off
    assert full["models"]["providers"]["parley"]["baseUrl"] == "http://h/v1"


FIRST_REQUEST = {
    "model": "parley",
    "messages": [
        {"role": "system", "content": "You are a personal assistant running inside OpenClaw."},
        {"role": "user", "content": "[Sat 2026-12-05 21:06 UTC] What is 2+2?"},
    ],
    "stream": True,
    "stream_options": {"include_usage": True},
    "tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}],
    "tool_choice": "auto",
    "max_completion_tokens": 256,
}


def _sse(*payloads: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads) + (
        b"data: [DONE]\n\n"
    )


def test_the_proxy_reads_what_openclaw_sends_and_what_came_back() -> None:
    exchange = Exchange("POST", "/v1/chat/completions", request_bytes=100)
    describe_request(exchange, FIRST_REQUEST)
    assert exchange.tools == ["read"] and exchange.messages == 2
    assert exchange.roles == ["system", "user"] and exchange.system_chars == 53
    assert exchange.fields["messages"] == "<2 items>" and exchange.fields["tool_choice"] == "auto"
    describe_answer(
        exchange,
        _sse(
            {"choices": [{"index": 0, "delta": {"content": "Four"}}]},
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {"index": 0, "id": "call_1", "function": {"name": "read"}}
                            ]
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
            {"choices": [], "usage": {"prompt_tokens": 1977, "completion_tokens": 9}},
        ),
        streamed=True,
    )
    assert (exchange.text, exchange.tool_calls, exchange.chunks) == ("Four", ["read"], 3)
    assert exchange.finish_reason == "tool_calls" and exchange.usage["prompt_tokens"] == 1977


def test_the_proxy_keeps_an_error_in_openais_format() -> None:
    exchange = Exchange("POST", "/v1/chat/completions", request_bytes=10)
    body = {"error": {"message": "maximum context length", "code": "context_length_exceeded"}}
    describe_answer(exchange, json.dumps(body).encode(), streamed=False)
    assert exchange.error_code == "context_length_exceeded"
    describe_answer(exchange, b"<html>not json</html>", streamed=False)  # no exception


def test_the_reply_is_read_from_openclaws_json_output_or_kept_as_it_is() -> None:
    assert reply_text('{"payloads": [{"text": "Paris."}], "meta": {}}') == "Paris."
    assert reply_text("plain text\n") == "plain text"
    assert reply_text('{"payloads": []}') == ""


def _chat(status: int = 200, **fields) -> Exchange:
    exchange = Exchange("POST", "/v1/chat/completions", request_bytes=1, status=status)
    for name, value in fields.items():
        setattr(exchange, name, value)
    return exchange


def test_a_session_with_a_failed_turn_a_refusal_or_a_lost_tool_result_fails_by_name() -> None:
    report = CheckReport(session_id="s", profile={}, turns=[], exchanges=[])
    turns = [TurnResult("hi", 0, 1.0, "Hello", ""), TurnResult("more", 1, 1.0, "", "boom")]
    exchanges = [
        _chat(),
        _chat(400, error_code="context_length_exceeded", error_message="too long"),
        _chat(forced_tool="read", tool_calls=["read"], roles=["system", "user"]),
        _chat(roles=["system", "user", "assistant"]),  # no tool message after the call
    ]
    _check_client_side(report, turns, exchanges)
    assert len(report.failures) == 3
    assert "turn 2: OpenClaw exited 1" in report.failures[0]
    assert "request 2: 400 context_length_exceeded" in report.failures[1]
    assert "did not send the tool's result back" in report.failures[2]
    clean = CheckReport(session_id="s", profile={}, turns=[], exchanges=[])
    good = [_chat(), _chat(forced_tool="read", tool_calls=["read"]), _chat(roles=["tool"])]
    _check_client_side(clean, turns[:1], good)
    assert clean.passed and clean.tool_round_trip.startswith("the tool ran")
    # Arguments OpenClaw refused: it sends the same request again, which is its contract.
    again = CheckReport(session_id="s", profile={}, turns=[], exchanges=[])
    asked = ["system", "user"]
    retried = [_chat(forced_tool="read", tool_calls=["read"], roles=asked), _chat(roles=asked)]
    _check_client_side(again, turns[:1], retried)
    assert again.passed and "asked again" in again.tool_round_trip
    # A call cut at maxTokens: Parley says finish_reason length, OpenClaw refuses half a call.
    cut = CheckReport(session_id="s", profile={}, turns=[], exchanges=[])
    three = [*turns[:1], TurnResult("hi", 0, 1.0, "Hi", ""), TurnResult("read", 1, 1.0, "", "")]
    three[2].log = "[agent/embedded] incomplete turn detected: stopReason=length"
    chats = [
        _chat(),
        _chat(),
        _chat(forced_tool="read", tool_calls=["read"], finish_reason="length"),
    ]
    _check_client_side(cut, three, chats)
    assert cut.passed and "cut at maxTokens" in cut.tool_round_trip


def test_an_answer_openclaw_sends_back_changed_is_named() -> None:
    def chat(messages: list[dict], text: str) -> Exchange:
        exchange = Exchange(method="POST", path="/v1/chat/completions", request_bytes=1)
        describe_request(exchange, {"messages": messages})
        exchange.text = text
        return exchange

    q1, q2 = {"role": "user", "content": "q1"}, {"role": "user", "content": "q2"}
    first = chat([q1], "Sure! <final>Done.</final>")
    same = chat([q1, {"role": "assistant", "content": "Sure! <final>Done.</final>"}, q2], "Ok")
    assert _reworked_answers([first, same]) == []
    reworked = chat([q1, {"role": "assistant", "content": "Sure! Done."}, q2], "Ok")
    retry = chat([q1, {"role": "assistant", "content": "Sure! Done."}, q2], "Fine")
    (changed,) = _reworked_answers([first, reworked, retry])  # a retry carries nothing new
    assert changed == "answer 1 'Sure! <final>Done.</final>' came back as 'Sure! Done.'"
