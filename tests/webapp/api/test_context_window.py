"""The context window through /v1: stated in /v1/models, an answer that cannot fit refused in
OpenAI's words (never silently cut), a prompt vLLM finds too long named as such; and the
``user`` field, which names a person, not a session; with a scripted model server."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from tests.webapp.api.openai_format import BODY, assert_openai_error, post_json, scripted_chunks
from webapp.chat.models import Conversation, Message
from webapp.inference import ServingError

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("close_worker_thread_connections"),
]


def _long_prompt_stream(prompt_tokens: int, calls: list[str]):
    async def stream(messages, *, model, params=None, base_url=None, adapter_path="", lineage=None):
        chunks = scripted_chunks("a b c")
        chunks[0]["prompt_token_ids"] = list(range(prompt_tokens))
        try:
            for chunk in chunks:
                yield chunk
        finally:
            calls.append("closed")

    return stream


async def test_models_state_the_context_window_and_the_largest_answer(secret, settings) -> None:
    settings.VLLM_MAX_MODEL_LEN = 8192
    settings.API_MAX_TOKENS = 2048
    response = await AsyncClient().get("/v1/models", headers={"Authorization": f"Bearer {secret}"})
    parley = json.loads(response.content)["data"][0]
    assert parley["id"] == "parley"
    assert parley["max_model_len"] == parley["context_window"] == 8192
    assert parley["max_output_tokens"] == 2048


async def test_an_answer_that_cannot_fit_the_window_is_refused_not_cut(
    secret, settings, monkeypatch
) -> None:
    settings.VLLM_MAX_MODEL_LEN = 2048
    calls: list[str] = []
    monkeypatch.setattr("webapp.api.completions.stream_chat", _long_prompt_stream(1979, calls))
    body = {**BODY, "max_completion_tokens": 256, "stream": True}
    response = await post_json(AsyncClient(), "/v1/chat/completions", body, secret)
    error = assert_openai_error(response, 400)
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert error["message"].startswith("This model's maximum context length is 2048 tokens.")
    assert "2235 tokens (1979 in the messages, 256 in the completion)" in error["message"]
    assert calls == ["closed"]  # the stream was closed, so vLLM aborts the answer
    # Nothing is lost: the user's message is kept and the refused answer says why.
    answer = await sync_to_async(Message.objects.get)(role="assistant")
    assert answer.status == "failed" and "maximum context length" in answer.error
    assert await sync_to_async(Message.objects.filter(role="user", content="hi").count)() == 1


async def test_an_answer_that_fits_exactly_is_served(secret, settings, monkeypatch) -> None:
    settings.VLLM_MAX_MODEL_LEN = 2048
    monkeypatch.setattr("webapp.api.completions.stream_chat", _long_prompt_stream(1792, []))
    body = {**BODY, "max_tokens": 256}
    response = await post_json(AsyncClient(), "/v1/chat/completions", body, secret)
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["choices"][0]["message"]["content"] == "a b c"


async def test_without_max_tokens_the_answer_may_use_the_rest_of_the_window(
    secret, settings, monkeypatch
) -> None:
    settings.VLLM_MAX_MODEL_LEN = 2048
    monkeypatch.setattr("webapp.api.completions.stream_chat", _long_prompt_stream(2040, []))
    response = await post_json(AsyncClient(), "/v1/chat/completions", BODY, secret)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("vllm_message", "tokens"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, your prompt contains "
            "15310 input tokens, which exceeds this limit even without any output tokens. "
            "Please reduce the length of the input prompt.",
            "15310",
        ),
        ("Input length (9001) exceeds model's maximum context length (8192).", "9001"),
        (
            # vLLM tokenizes one past the window and says so (OpenClaw's whole agent, 49 KB).
            "This model's maximum context length is 8192 tokens. However, your prompt contains "
            "at least 8193 input tokens, which exceeds this limit even without any output "
            "tokens. Please reduce the length of the input prompt.",
            "at least 8193",
        ),
    ],
)
async def test_a_prompt_longer_than_the_window_is_context_length_exceeded(
    secret, settings, monkeypatch, vllm_message, tokens
) -> None:
    settings.VLLM_MAX_MODEL_LEN = 8192

    async def refusing(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        raise ServingError(400, vllm_message, "input_tokens")
        yield {}

    monkeypatch.setattr("webapp.api.completions.stream_chat", refusing)
    response = await post_json(AsyncClient(), "/v1/chat/completions", BODY, secret)
    error = assert_openai_error(response, 400)
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert error["message"] == (
        f"This model's maximum context length is 8192 tokens. However, your messages contain "
        f"{tokens} tokens. Please reduce the length of the messages or completion."
    )


async def test_another_wording_of_an_overflow_keeps_vllms_words_under_openais_code(
    secret, monkeypatch
) -> None:
    said = (
        "This model's maximum context length is 8192 tokens. However, you requested 8531 "
        "tokens (7931 in the messages, 600 in the completion). Please reduce the length."
    )

    async def refusing(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        raise ServingError(400, said, None)
        yield {}

    monkeypatch.setattr("webapp.api.completions.stream_chat", refusing)
    response = await post_json(AsyncClient(), "/v1/chat/completions", BODY, secret)
    error = assert_openai_error(response, 400)
    assert (error["code"], error["message"]) == ("context_length_exceeded", said)


async def test_other_refusals_of_the_model_server_keep_their_message(secret, monkeypatch) -> None:
    async def refusing(
        messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        raise ServingError(400, "tool_choice 'required' needs tools", "tool_choice")
        yield {}

    monkeypatch.setattr("webapp.api.completions.stream_chat", refusing)
    response = await post_json(AsyncClient(), "/v1/chat/completions", BODY, secret)
    error = assert_openai_error(response, 400)
    assert error["code"] == "serving_rejected" and "tool_choice" in error["message"]


async def test_the_user_field_names_the_end_user_and_never_joins_two_chats(
    secret, scripted
) -> None:
    """Clients such as LibreChat send the same ``user`` with every chat of a person."""
    client = AsyncClient()
    for text in ("first chat", "second chat"):
        body = {"model": "parley", "user": "sam", "messages": [{"role": "user", "content": text}]}
        assert (await post_json(client, "/v1/chat/completions", body, secret)).status_code == 200
    assert await sync_to_async(Conversation.objects.count)() == 2
