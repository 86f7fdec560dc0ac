"""The learning loop's first half on the running system: the real judge worker on the real
broker, judging with the real base model in vLLM."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from trainer.judge import VOTE_CHOICES, build_prm_messages, parse_vote
from trainer.judge_client import JudgeEndpoint, complete_n

pytestmark = pytest.mark.stack


def _wait_for(stack, query: str, params: tuple, expected_rows: int, timeout: float = 240) -> list:
    deadline = time.monotonic() + timeout
    rows: list = []
    while time.monotonic() < deadline:
        rows = stack.sql(query, params)
        if len(rows) >= expected_rows:
            return rows
        time.sleep(1)
    raise AssertionError(f"only {len(rows)} of {expected_rows} rows after {timeout} s: {rows}")


def test_feedback_and_follow_ups_become_judgements_and_samples(stack, stack_api_key) -> None:
    client = openai.OpenAI(
        base_url=stack.web_url + "/v1", api_key=stack_api_key, max_retries=0, timeout=120
    )
    session = {"X-Session-Id": "judging-live-1"}
    messages = [{"role": "user", "content": "What is the capital of Italy?"}]
    first = client.chat.completions.create(
        model="parley", messages=messages, max_tokens=24, temperature=0, extra_headers=session
    )
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Wrong, I asked about Italy. Answer with just the city."},
    ]
    second = client.chat.completions.create(
        model="parley", messages=messages, max_tokens=24, temperature=0, extra_headers=session
    )
    third_messages = [{"role": "user", "content": "Name a primary colour."}]
    third = client.chat.completions.create(
        model="parley",
        messages=third_messages,
        max_tokens=12,
        extra_headers={"X-Session-Id": "judging-live-2"},
    )
    headers = {"Authorization": f"Bearer {stack_api_key}"}
    for body in (
        {"completion_id": second.id, "rating": 1},
        {"completion_id": third.id, "rating": -1, "comment": "Start your answer with 'Sure!'"},
    ):
        assert (
            httpx.post(
                stack.web_url + "/v1/feedback", json=body, headers=headers, timeout=30
            ).status_code
            == 200
        )

    rows = _wait_for(
        stack,
        (
            "SELECT m.completion_id, j.source, j.score, jsonb_array_length(j.votes), s.kind, "
            "s.reward, s.hint, jsonb_array_length(s.response_token_ids) "
            "FROM learning_judgement j JOIN chat_message m ON m.id = j.message_id "
            "LEFT JOIN learning_sample s ON s.judgement_id = j.id AND s.status = 'ready' "
            "WHERE m.completion_id = ANY(%s) ORDER BY j.id"
        ),
        ([first.id, second.id, third.id],),
        3,
    )
    by_id = {row[0]: row[1:] for row in rows}
    source, score, votes, *_ = by_id[first.id]
    # The default judge read "Wrong, I asked about Italy. ..." in the next message.
    assert source == "prm" and votes == 1 and score == -1
    assert by_id[second.id][:2] == ("feedback", 1) and by_id[second.id][3:5] == ("rl", 1.0)
    assert by_id[third.id][3:6] == ("combined", -1.0, "Start your answer with 'Sure!'")
    assert by_id[third.id][6] > 0
    raw_votes = stack.sql(
        "SELECT j.votes FROM learning_judgement j JOIN chat_message m ON m.id = j.message_id "
        "WHERE m.completion_id = %s",
        (first.id,),
    )[0][0]
    assert all(vote["text"] for vote in raw_votes)  # the raw judge text is stored with each vote


def test_the_llm_judge_on_vllm_gets_votes_that_all_parse(stack) -> None:
    """PARLEY_JUDGE=llm against the real vLLM: structured outputs keep every vote to a box."""
    endpoint = JudgeEndpoint(
        base_url=stack.vllm_url, model="base", max_tokens=16, api_key=stack.vllm_api_key
    )
    messages = build_prm_messages(
        request="What is the capital of Italy?",
        answer="The capital of Italy is Paris.",
        next_state="[user] No, that's wrong. Paris is in France.",
    )
    texts = complete_n(endpoint, messages, 3, choices=VOTE_CHOICES)
    assert len(texts) == 3 and all(text in VOTE_CHOICES for text in texts)
    assert all(parse_vote(text) is not None for text in texts)


def test_a_bare_thumbs_down_gets_answers_sampled_beside_it_by_the_real_worker(
    stack, stack_api_key
) -> None:
    """The judge worker judges the 👎, then samples the answers to compare it with from vLLM:
    hidden siblings, each a reward-0 sample in the 👎's group."""
    client = openai.OpenAI(
        base_url=stack.web_url + "/v1", api_key=stack_api_key, max_retries=0, timeout=120
    )
    answer = client.chat.completions.create(
        model="parley",
        messages=[{"role": "user", "content": "Name a fruit."}],
        max_tokens=12,
        extra_headers={"X-Session-Id": "judging-live-alternatives"},
    )
    posted = httpx.post(
        stack.web_url + "/v1/feedback",
        json={"completion_id": answer.id, "rating": -1},
        headers={"Authorization": f"Bearer {stack_api_key}"},
        timeout=30,
    )
    assert posted.status_code == 200, posted.text
    rows = _wait_for(
        stack,
        "SELECT s.reward, s.group_key, m.turn_type, m.selected, length(m.content) "
        "FROM learning_sample s JOIN chat_message m ON m.id = s.message_id "
        "WHERE m.parent_id = (SELECT parent_id FROM chat_message WHERE completion_id = %s) "
        "ORDER BY s.id",
        (answer.id,),
        expected_rows=4,
    )
    (disliked, *unseen) = rows
    assert disliked[0] == -1.0 and disliked[2] == "main"
    assert len(unseen) == 3
    assert all(r[0] == 0.0 and r[1] == disliked[1] and r[2:4] == ("unseen", False) for r in unseen)


def test_a_tool_result_holding_a_key_makes_a_sample_that_never_trains(stack, stack_api_key):
    """An agent read a .env file through /v1: its turn is judged and kept, set aside with the
    reason, and nothing is sampled beside its 👎."""
    client = openai.OpenAI(
        base_url=stack.web_url + "/v1", api_key=stack_api_key, max_retries=0, timeout=120
    )
    call = {
        "id": "call_env",
        "type": "function",
        "function": {"name": "read", "arguments": json.dumps({"path": ".env"})},
    }
    answer = client.chat.completions.create(
        model="parley",
        messages=[
            {"role": "user", "content": "Which AWS region does my .env use?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": "call_env",
                "content": "AWS_REGION=eu-west-1\nAWS_ACCESS_KEY_ID=AKIAQ4NRXG7VJ2MHT5LD\n"
                "AWS_SECRET_ACCESS_KEY=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",
            },
        ],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "read",
                    "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
            }
        ],
        max_tokens=16,
        extra_headers={"X-Session-Id": "judging-live-secret"},
    )
    posted = httpx.post(
        stack.web_url + "/v1/feedback",
        json={"completion_id": answer.id, "rating": -1},
        headers={"Authorization": f"Bearer {stack_api_key}"},
        timeout=30,
    )
    assert posted.status_code == 200, posted.text
    ((status, reason),) = _wait_for(
        stack,
        "SELECT s.status, s.exclusion_reason FROM learning_sample s "
        "JOIN chat_message m ON m.id = s.message_id WHERE m.completion_id = %s",
        (answer.id,),
        expected_rows=1,
    )
    assert status == "excluded"
    assert reason.startswith("contains a secret: ") and "AWS Access Key in a tool result" in reason
    assert "AKIAQ4NRXG7VJ2MHT5LD" not in reason
    assert stack.sql(
        "SELECT count(*) FROM learning_alternativesjob j JOIN chat_message m "
        "ON m.id = j.disliked_id WHERE m.completion_id = %s",
        (answer.id,),
    ) == [(0,)]
