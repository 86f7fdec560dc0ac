"""Request parsing: what may reach vLLM, and a 400 naming the field for what may not."""

from __future__ import annotations

import pytest

from webapp.api.errors import ApiError
from webapp.api.schemas import parse_chat_request, parse_json_body

USER = [{"role": "user", "content": "hi"}]


def _error(body: dict) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_chat_request(body)
    assert caught.value.status == 400
    return caught.value


def test_a_minimal_request_parses_with_defaults() -> None:
    chat = parse_chat_request({"model": "parley", "messages": USER})
    assert chat.messages == [{"role": "user", "content": "hi"}]
    assert (chat.stream, chat.include_usage, chat.want_logprobs, chat.n) == (False, False, False, 1)
    assert chat.params == {}


def test_unknown_fields_are_ignored() -> None:
    chat = parse_chat_request({"model": "parley", "messages": USER, "store": True, "metadata": {}})
    assert "store" not in chat.params and "metadata" not in chat.params


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    chat = parse_chat_request(
        {"model": "parley", "messages": USER, "max_tokens": 5, "max_completion_tokens": 9}
    )
    assert chat.params["max_tokens"] == 9


def test_sampling_fields_are_forwarded() -> None:
    chat = parse_chat_request(
        {
            "model": "parley",
            "messages": USER,
            "temperature": 0.3,
            "top_p": 0.9,
            "stop": "END",
            "seed": 7,
            "n": 2,
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "tool_choice": "auto",
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    assert chat.params == {
        "temperature": 0.3,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
        "n": 2,
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": "auto",
    }
    assert chat.stream and chat.include_usage and chat.n == 2


def test_text_parts_are_joined_and_developer_is_system() -> None:
    chat = parse_chat_request(
        {
            "model": "parley",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
            ],
        }
    )
    assert chat.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "ab"},
    ]


def test_assistant_tool_calls_and_tool_results_are_kept() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    chat = parse_chat_request(
        {
            "model": "parley",
            "messages": [
                *USER,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": "42"},
            ],
        }
    )
    assert chat.messages[1] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert chat.messages[2] == {"role": "tool", "content": "42", "tool_call_id": "call_1"}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": USER}, "model"),
        ({"model": 3, "messages": USER}, "model"),
        ({"model": "parley"}, "messages"),
        ({"model": "parley", "messages": []}, "messages"),
        ({"model": "parley", "messages": "hi"}, "messages"),
        ({"model": "parley", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"model": "parley", "messages": [{"content": "x"}]}, "messages[0].role"),
        ({"model": "parley", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"model": "parley", "messages": [{"role": "tool", "content": "x"}]},
            "messages[0].tool_call_id",
        ),
        ({"model": "parley", "messages": USER, "max_tokens": -1}, "max_tokens"),
        ({"model": "parley", "messages": USER, "max_tokens": 0}, "max_tokens"),
        ({"model": "parley", "messages": USER, "max_tokens": "10"}, "max_tokens"),
        (
            {"model": "parley", "messages": USER, "max_completion_tokens": 1.5},
            "max_completion_tokens",
        ),
        ({"model": "parley", "messages": USER, "temperature": 3}, "temperature"),
        ({"model": "parley", "messages": USER, "temperature": True}, "temperature"),
        ({"model": "parley", "messages": USER, "top_p": -0.1}, "top_p"),
        ({"model": "parley", "messages": USER, "n": 0}, "n"),
        ({"model": "parley", "messages": USER, "n": 99}, "n"),
        ({"model": "parley", "messages": USER, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"model": "parley", "messages": USER, "stream": "yes"}, "stream"),
        ({"model": "parley", "messages": USER, "tools": [{"type": "function"}]}, "tools"),
        ({"model": "parley", "messages": USER, "tool_choice": "sometimes"}, "tool_choice"),
    ],
)
def test_invalid_fields_are_a_400_naming_the_field(body: dict, param: str) -> None:
    error = _error(body)
    assert error.param == param
    assert error.message


@pytest.mark.parametrize(
    ("raw", "text"),
    [(b"{not json", "not valid JSON"), (b"\xff\xfe{}", "UTF-8"), (b"[1, 2]", "JSON object")],
)
def test_bodies_that_are_not_a_json_object(raw: bytes, text: str) -> None:
    with pytest.raises(ApiError, match=text):
        parse_json_body(raw)
