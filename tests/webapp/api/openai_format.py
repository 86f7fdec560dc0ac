"""What the /v1 tests send and expect: a scripted model server's chunks in vLLM's streaming
format, a JSON POST with a key, and an error in OpenAI's format."""

from __future__ import annotations

import json

from django.test import AsyncClient

BODY = {"model": "parley", "messages": [{"role": "user", "content": "hi"}]}


def scripted_chunks(text: str) -> list[dict]:
    chunks = [
        {
            "id": "x",
            "created": 1,
            "prompt_token_ids": [1, 2, 3],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        }
    ]
    for i, piece in enumerate(text.split(" ")):
        chunks.append(
            {
                "id": "x",
                "created": 1,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": (" " if i else "") + piece},
                        "token_ids": [100 + i],
                        "logprobs": {
                            "content": [
                                {"token": piece, "logprob": -0.5, "bytes": [], "top_logprobs": []}
                            ]
                        },
                    }
                ],
            }
        )
    chunks.append(
        {"id": "x", "created": 1, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    )
    chunks.append(
        {
            "id": "x",
            "created": 1,
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
        }
    )
    return chunks


def post_json(client: AsyncClient, path: str, body, secret: str | None, **headers):
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", headers=headers)


def assert_openai_error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = json.loads(response.content)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error
