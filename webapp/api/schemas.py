"""Parsing and checking /v1 request bodies; what passes here is safe to forward to vLLM.

Unknown fields are ignored, as OpenAI clients expect; known fields with the wrong type or
range are a 400 that names the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from webapp.api.errors import ApiError
from webapp.chat.limits import contains_nul

ROLES = {"system", "developer", "user", "assistant", "tool"}


def bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value" if param else None)


def parse_json_body(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
        body = json.loads(text)
    except UnicodeDecodeError as exc:
        raise bad("The request body is not valid UTF-8.") from exc
    except json.JSONDecodeError as exc:
        raise bad(f"The request body is not valid JSON ({exc.msg} at line {exc.lineno}).") from exc
    except RecursionError as exc:
        raise bad("The request body is nested too deeply.") from exc
    # Refused here, before the model is asked and before anything is half stored.
    if contains_nul(body):
        raise bad("The request contains a NUL character (\\u0000), which cannot be stored.")
    if not isinstance(body, dict):
        raise bad("The request body must be a JSON object.")
    return body


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad(f"'{name}' must be a number.", name)
    if not low <= value <= high:
        raise bad(f"'{name}' must be between {low} and {high}, got {value}.", name)
    return value


def _integer(body: dict[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"'{name}' must be an integer.", name)
    if value < low or (high is not None and value > high):
        limit = f"at least {low}" if high is None else f"between {low} and {high}"
        raise bad(f"'{name}' must be {limit}, got {value}.", name)
    return value


def _content_text(content: Any, index: int) -> str:
    """Text of a message's content: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
                raise bad(
                    "Only text content parts are supported by this model.",
                    f"messages[{index}].content",
                )
            if not isinstance(part.get("text"), str):
                raise bad(
                    "A text content part needs a 'text' string.", f"messages[{index}].content"
                )
            texts.append(part["text"])
        return "".join(texts)
    raise bad("'content' must be a string or a list of text parts.", f"messages[{index}].content")


def _message(raw: Any, index: int) -> dict[str, Any]:
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise bad(f"{where} must be an object.", where)
    role = raw.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise bad(
            f"{where}.role must be one of {', '.join(sorted(ROLES))}; got {role!r}.",
            f"{where}.role",
        )
    message: dict[str, Any] = {"role": "system" if role == "developer" else role}
    message["content"] = _content_text(raw.get("content"), index)
    tool_calls = raw.get("tool_calls")
    if tool_calls is not None:
        if role != "assistant" or not isinstance(tool_calls, list):
            raise bad(f"{where}.tool_calls must be a list on an assistant message.", where)
        for call in tool_calls:
            if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                raise bad(f"{where}.tool_calls entries need a 'function' object.", where)
        message["tool_calls"] = tool_calls
    if role == "tool":
        if not isinstance(raw.get("tool_call_id"), str):
            raise bad(
                f"{where}.tool_call_id is required on a tool message.", f"{where}.tool_call_id"
            )
        message["tool_call_id"] = raw["tool_call_id"]
    if isinstance(raw.get("name"), str):
        message["name"] = raw["name"]
    return message


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    stream: bool
    include_usage: bool
    want_logprobs: bool
    top_logprobs: int | None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.params.get("n") or 1)


def _sampling_params(body: dict[str, Any]) -> dict[str, Any]:
    """What vLLM is asked to sample with: the known fields, each checked."""
    params: dict[str, Any] = {}
    # Above the caps a request is refused, not clamped: OpenAI answers a too-large max_tokens
    # or n with a 400 too, and a clamped answer would look complete while being cut short.
    cap = settings.API_MAX_TOKENS
    max_tokens = _integer(body, "max_completion_tokens", 1, cap)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1, cap)
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    for name, low, high in (
        ("temperature", 0, 2),
        ("top_p", 0, 1),
        ("presence_penalty", -2, 2),
        ("frequency_penalty", -2, 2),
    ):
        if _number(body, name, low, high) is not None:
            params[name] = body[name]
    if _integer(body, "n", 1, settings.API_MAX_N) is not None:
        params["n"] = body["n"]
    if _integer(body, "seed", -(2**63), 2**63 - 1) is not None:
        params["seed"] = body["seed"]
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop) or len(stop) > 4:
            raise bad("'stop' must be a string or a list of up to 4 strings.", "stop")
        params["stop"] = stop
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(
            isinstance(t, dict)
            and isinstance(t.get("function"), dict)
            and t["function"].get("name")
            for t in tools
        ):
            raise bad("'tools' must be a list of {type: function, function: {name, ...}}.", "tools")
        params["tools"] = tools
    tool_choice = body.get("tool_choice")
    if tool_choice is not None:
        if not (tool_choice in ("none", "auto", "required") or isinstance(tool_choice, dict)):
            raise bad("'tool_choice' must be none, auto, required or a named tool.", "tool_choice")
        params["tool_choice"] = tool_choice
    for name in (
        "parallel_tool_calls",
        "response_format",
        "logit_bias",
        "top_k",
        "min_p",
        "repetition_penalty",
    ):
        if body.get(name) is not None:
            params[name] = body[name]
    return params


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("'model' is required and must be a string.", "model")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad("'messages' must be a non-empty list.", "messages")
    messages = [_message(raw, index) for index, raw in enumerate(raw_messages)]

    params = _sampling_params(body)

    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("'stream' must be a boolean.", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad("'stream_options' must be an object.", "stream_options")
    logprobs = body.get("logprobs", False)
    if not isinstance(logprobs, bool):
        raise bad("'logprobs' must be a boolean.", "logprobs")
    top_logprobs = _integer(body, "top_logprobs", 0, 20)
    if top_logprobs:
        params["top_logprobs"] = top_logprobs
    return ChatRequest(
        model=model,
        messages=messages,
        stream=stream,
        include_usage=bool(options.get("include_usage")),
        want_logprobs=logprobs,
        top_logprobs=top_logprobs,
        params=params,
    )
