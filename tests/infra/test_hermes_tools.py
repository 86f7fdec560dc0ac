"""Hermes tool calls out of a stream of text, however the text is cut."""

from __future__ import annotations

import json

from webapp.infra.hermes_tools import ToolCallStream

TEXT = 'Let me look.<tool_call>\n{"name": "weather", "arguments": {"city": "Zürich"}}\n</tool_call>'


def _feed_in_pieces(text: str, size: int) -> tuple[str, list[dict]]:
    stream = ToolCallStream()
    content, calls = "", []
    for start in range(0, len(text), size):
        shown, done = stream.feed(text[start : start + size])
        content += shown
        calls += done
    shown, done = stream.feed("", final=True)
    return content + shown, calls + done


def test_a_call_is_taken_out_whatever_the_pieces() -> None:
    for size in (1, 3, 7, len(TEXT)):
        content, calls = _feed_in_pieces(TEXT, size)
        assert content == "Let me look."
        assert len(calls) == 1
        assert calls[0]["function"]["name"] == "weather"
        assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Zürich"}
        assert calls[0]["type"] == "function" and calls[0]["id"]


def test_text_that_is_not_a_call_stays_content() -> None:
    broken = "a <tool_call>{not json}</tool_call> b"
    assert _feed_in_pieces(broken, 4) == (broken, [])
    unclosed = "a <tool_call>{"
    assert _feed_in_pieces(unclosed, 2) == (unclosed, [])
    assert _feed_in_pieces("x < y and <tool", 1) == ("x < y and <tool", [])


def test_two_calls_are_numbered() -> None:
    one = '<tool_call>{"name": "a", "arguments": "{}"}</tool_call>'
    two = '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    _, calls = _feed_in_pieces(one + two, 5)
    assert [(c["index"], c["function"]["name"]) for c in calls] == [(0, "a"), (1, "b")]
