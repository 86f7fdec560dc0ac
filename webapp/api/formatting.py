"""What /v1 sends back: vLLM's chunks and results in OpenAI's shape, and SSE error events."""

from __future__ import annotations

import json
import time
from typing import Any

from webapp.api.schemas import ChatRequest
from webapp.inference import CompletionAccumulator


def client_chunk(
    chunk: dict[str, Any], *, completion_id: str, model: str, chat: ChatRequest
) -> dict[str, Any] | None:
    """vLLM's chunk as OpenAI sends it: our id and model name, no vLLM-only fields."""
    choices = []
    for raw in chunk.get("choices") or []:
        delta = dict(raw.get("delta") or {})
        reasoning = delta.pop("reasoning", None)
        if reasoning and not delta.get("reasoning_content"):
            delta["reasoning_content"] = reasoning
        choices.append(
            {
                "index": raw.get("index", 0),
                "delta": delta,
                "logprobs": raw.get("logprobs") if chat.want_logprobs else None,
                "finish_reason": raw.get("finish_reason"),
            }
        )
    out: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": chunk.get("created") or int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": choices,
    }
    if chunk.get("usage"):
        if not chat.include_usage:
            return out if choices else None
        out["usage"] = chunk["usage"]
    elif not choices:
        return None
    return out


def carries_output(chunk: dict[str, Any]) -> bool:
    """Whether a chunk gives the client part of the answer (not just the opening role)."""
    return any(
        choice["delta"].get("content")
        or choice["delta"].get("reasoning_content")
        or choice["delta"].get("tool_calls")
        or choice.get("finish_reason")
        for choice in chunk["choices"]
    )


def sse_data(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def sse_error(message: str, code: str) -> str:
    body = {
        "error": {"message": message, "type": "service_unavailable", "param": None, "code": code}
    }
    return f"data: {json.dumps(body)}\n\n"


def completion_body(
    accumulator: CompletionAccumulator, *, completion_id: str, chat: ChatRequest
) -> dict[str, Any]:
    choices = []
    for index in range(chat.n):
        result = accumulator.choice(index)
        choices.append(
            {
                "index": index,
                "message": result.message(),
                "logprobs": {"content": result.logprob_content} if chat.want_logprobs else None,
                "finish_reason": result.finish_reason or "stop",
            }
        )
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": accumulator.created or int(time.time()),
        "model": chat.model,
        "system_fingerprint": None,
        "choices": choices,
        "usage": accumulator.usage,
    }
