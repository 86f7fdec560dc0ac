"""The OpenAPI 3.1 description of /v1, served at /v1/openapi.json (schemathesis tests it)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from webapp.chat.feedback_spec import openapi_properties

ERROR = {"$ref": "#/components/schemas/Error"}
ERRORS = {
    str(code): {"description": text, "content": {"application/json": {"schema": ERROR}}}
    for code, text in (
        (400, "Invalid request"),
        (401, "Missing or bad API key"),
        (404, "Not found"),
        (405, "Method not allowed"),
        (413, "Body too large"),
        (429, "Rate limited"),
        (503, "Model server unreachable"),
    )
}

MESSAGE = {
    "type": "object",
    "required": ["role"],
    "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {
            "anyOf": [
                {"type": "string"},
                {"type": "null"},
                {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["type", "text"],
                        "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
                    },
                },
            ]
        },
        "name": {"type": "string"},
        "tool_call_id": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object"}},
    },
}

CHAT_REQUEST: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "examples": ["parley"]},
        "messages": {"type": "array", "minItems": 1, "items": MESSAGE},
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
        "max_tokens": {"type": "integer", "minimum": 1},
        "max_completion_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "top_p": {"type": "number", "minimum": 0, "maximum": 1},
        "n": {"type": "integer", "minimum": 1},
        "seed": {"type": "integer"},
        "stop": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            ]
        },
        "logprobs": {"type": "boolean"},
        "top_logprobs": {"type": "integer", "minimum": 0, "maximum": 20},
        "tools": {"type": "array", "items": {"type": "object"}},
        "tool_choice": {},
        "user": {"type": "string"},
    },
}


def _chat_request() -> dict[str, Any]:
    """CHAT_REQUEST with this server's caps on ``max_tokens`` and ``n`` (settings)."""
    properties = dict(CHAT_REQUEST["properties"])
    for name in ("max_tokens", "max_completion_tokens"):
        properties[name] = {**properties[name], "maximum": settings.API_MAX_TOKENS}
    properties["n"] = {**properties["n"], "maximum": settings.API_MAX_N}
    return {**CHAT_REQUEST, "properties": properties}


def schema() -> dict[str, Any]:
    secured = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "Parley OpenAI-compatible API", "version": "1.0.0"},
        "servers": [{"url": "/"}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["message", "type"],
                            "properties": {
                                "message": {"type": "string"},
                                "type": {"type": "string"},
                                "param": {"type": ["string", "null"]},
                                "code": {"type": ["string", "null"]},
                            },
                        }
                    },
                },
            },
        },
        "paths": {
            "/v1/models": {
                "get": {
                    "operationId": "listModels",
                    "security": secured,
                    "responses": {
                        "200": {
                            "description": "Models",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        **ERRORS,
                    },
                }
            },
            "/v1/chat/completions": {
                "post": {
                    "operationId": "createChatCompletion",
                    "security": secured,
                    "parameters": [
                        {"name": "X-Session-Id", "in": "header", "schema": {"type": "string"}},
                        {
                            "name": "X-Turn-Type",
                            "in": "header",
                            "schema": {"type": "string", "enum": ["main", "side"]},
                        },
                        {"name": "X-Session-Done", "in": "header", "schema": {"type": "string"}},
                        {
                            "name": "X-Parley-Memory",
                            "in": "header",
                            "schema": {"type": "string", "enum": ["on", "off"]},
                        },
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": _chat_request()}},
                    },
                    "responses": {
                        "200": {
                            "description": "A completion, or an SSE stream of chunks",
                            "content": {
                                "application/json": {"schema": {"type": "object"}},
                                "text/event-stream": {"schema": {"type": "string"}},
                            },
                        },
                        **ERRORS,
                    },
                }
            },
            "/v1/feedback": {
                "post": {
                    "operationId": "createFeedback",
                    "security": secured,
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["completion_id"],
                                    "properties": {
                                        "completion_id": {"type": "string"},
                                        **openapi_properties(),
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "Stored feedback",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        **ERRORS,
                    },
                }
            },
            **_memory_paths(secured),
        },
    }


def _memory_paths(secured: list[dict[str, list[str]]]) -> dict[str, Any]:
    """``/v1/memories``: list and add; one memory: read, change (text, state), delete."""
    memory = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "e.g. 'Call me Sam'"},
            "state": {"type": "string", "enum": ["active", "paused", "dismissed", "deleted"]},
        },
    }
    ok = {
        "200": {
            "description": "The memory, or the list",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **ERRORS,
    }
    body = {"required": True, "content": {"application/json": {"schema": memory}}}
    state = {"name": "state", "in": "query", "schema": {"type": "string"}}
    memory_id = {"name": "memory_id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "/v1/memories": {
            "get": {
                "operationId": "listMemories",
                "security": secured,
                "parameters": [state],
                "responses": ok,
            },
            "post": {
                "operationId": "createMemory",
                "security": secured,
                "requestBody": body,
                "responses": {"201": ok["200"], **ERRORS},
            },
        },
        "/v1/memories/{memory_id}": {
            "parameters": [memory_id],
            "get": {"operationId": "getMemory", "security": secured, "responses": ok},
            "patch": {
                "operationId": "updateMemory",
                "security": secured,
                "requestBody": body,
                "responses": ok,
            },
            "delete": {"operationId": "deleteMemory", "security": secured, "responses": ok},
        },
    }


def openapi_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schema())
