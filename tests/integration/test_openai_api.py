"""The /v1 API with the official `openai` package, against the running system and real vLLM."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

pytestmark = pytest.mark.stack

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def client(stack, stack_api_key) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=stack.web_url + "/v1", api_key=stack_api_key, max_retries=0, timeout=120
    )


def test_models_lists_the_stable_id(client) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids[0] == "parley" and "SmolLM2-135M-Instruct" in ids


def test_a_plain_completion_is_answered_and_recorded(stack, client) -> None:
    # The base model by its own id: "parley" is whatever version is live, and the stack's
    # learning loop may already have trained one from earlier tests' feedback.
    completion = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=20,
        temperature=0,
        seed=1,
    )
    text = completion.choices[0].message.content
    assert "paris" in text.lower()
    assert completion.usage.completion_tokens > 0
    rows = stack.sql(
        "SELECT content, jsonb_array_length(token_ids), jsonb_array_length(token_logprobs), status "
        "FROM chat_message WHERE completion_id = %s",
        (completion.id,),
    )
    assert rows == [
        (text, completion.usage.completion_tokens, completion.usage.completion_tokens, "complete")
    ]


def test_streaming_sends_several_chunks_before_the_last_and_usage(client) -> None:
    stream = client.chat.completions.create(
        model="parley",
        messages=[{"role": "user", "content": "Count from one to ten in words."}],
        max_tokens=40,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    contents, usage = [], None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        if chunk.choices and chunk.choices[0].delta.content:
            contents.append(chunk.choices[0].delta.content)
    assert len(contents) >= 5
    assert usage is not None and usage.completion_tokens >= len(contents) - 1


def test_a_tool_call_round_trip(client) -> None:
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(
        model="parley",
        messages=messages,
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=60,
        temperature=0,
    )
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and call.id
    json.loads(call.function.arguments)  # valid JSON; its shape is up to the model
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 °C"},
    ]
    second = client.chat.completions.create(
        model="parley", messages=messages, tools=[WEATHER_TOOL], max_tokens=30, temperature=0
    )
    assert second.choices[0].message.content or second.choices[0].message.tool_calls


def test_streamed_tool_call_deltas_carry_ids_and_arguments(client) -> None:
    stream = client.chat.completions.create(
        model="parley",
        messages=[{"role": "user", "content": "Weather in Rome?"}],
        tools=[WEATHER_TOOL],
        tool_choice="required",
        max_tokens=60,
        temperature=0,
        stream=True,
    )
    ids, arguments, finish = set(), "", None
    for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                if delta.id:
                    ids.add(delta.id)
                arguments += delta.function.arguments or "" if delta.function else ""
            finish = choice.finish_reason or finish
    assert ids and arguments
    json.loads(arguments)
    assert finish in ("tool_calls", "stop")


def test_feedback_by_completion_id(stack, client, stack_api_key) -> None:
    completion = client.chat.completions.create(
        model="parley",
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=10,
    )
    response = httpx.post(
        stack.web_url + "/v1/feedback",
        timeout=30,
        headers={"Authorization": f"Bearer {stack_api_key}"},
        json={
            "completion_id": completion.id,
            "rating": -1,
            "comment": "Please start with 'Sure!'",
            "correction": "Sure! Hello.",
        },
    )
    assert response.status_code == 200, response.text
    assert stack.sql(
        "SELECT f.rating, f.comment, f.correction FROM chat_feedback f JOIN chat_message m "
        "ON m.id = f.message_id WHERE m.completion_id = %s",
        (completion.id,),
    ) == [(-1, "Please start with 'Sure!'", "Sure! Hello.")]


def test_error_cases_through_the_openai_client(stack, client) -> None:
    bad_key = openai.OpenAI(base_url=stack.web_url + "/v1", api_key="pk-nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_key.models.list()
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="parley", messages=[], max_tokens=5)
    assert caught.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="parley", messages=[{"role": "user", "content": "x"}], max_tokens=-1
        )
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="parley", messages=[{"role": "robot", "content": "x"}])
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-99", messages=[{"role": "user", "content": "x"}])
    # The served window is the model's own 8,192 tokens: a longer prompt is OpenAI's
    # context_length_exceeded, and so is one that fits only without the answer it asks for
    # (vLLM would have cut that answer short, silently).
    with pytest.raises(openai.BadRequestError) as too_long:
        client.chat.completions.create(
            model="parley",
            messages=[{"role": "user", "content": "word " * 9000}],
            max_tokens=5,
        )
    assert too_long.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as no_room:
        client.chat.completions.create(
            model="parley",
            messages=[{"role": "user", "content": "word " * 7900}],
            max_tokens=600,
        )
    assert no_room.value.body["code"] == "context_length_exceeded"
    assert "600 in the completion" in no_room.value.body["message"]


def test_the_request_openclaw_sends(stack, stack_api_key) -> None:
    """OpenClaw's openai-completions provider: streamed, usage, max_completion_tokens, tools,
    content parts, and its session headers."""
    body = {
        "model": "parley",
        "messages": [
            {"role": "system", "content": "You are a personal assistant running inside OpenClaw."},
            {"role": "user", "content": [{"type": "text", "text": "Remind me what 2+2 is."}]},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "store": False,
        "max_completion_tokens": 24,
        "tools": [WEATHER_TOOL],
        "temperature": 0.2,
    }
    headers = {
        "Authorization": f"Bearer {stack_api_key}",
        "X-Session-Id": "openclaw-agent-main-1",
        "X-Turn-Type": "main",
    }
    events = []
    with httpx.stream(
        "POST", stack.web_url + "/v1/chat/completions", json=body, headers=headers, timeout=120
    ) as response:
        assert response.status_code == 200
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["usage"]["completion_tokens"] <= 24
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])

    # The next main request of the session makes the user's reply the answer's next state.
    body["messages"] += [
        {"role": "assistant", "content": text},
        {"role": "user", "content": "Thanks! And 3+3?"},
    ]
    body["stream"] = False
    body.pop("stream_options")
    follow = httpx.post(
        stack.web_url + "/v1/chat/completions",
        json=body,
        headers={**headers, "X-Session-Done": "1"},
        timeout=120,
    )
    assert follow.status_code == 200, follow.text
    rows = stack.sql(
        "SELECT a.turn_type, n.content, c.closed_at IS NOT NULL FROM chat_message a "
        "JOIN chat_message n ON n.id = a.next_state_id "
        "JOIN chat_conversation c ON c.id = a.conversation_id "
        "WHERE c.external_session_id = %s",
        ("openclaw-agent-main-1",),
    )
    assert rows == [("main", "Thanks! And 3+3?", True)]
