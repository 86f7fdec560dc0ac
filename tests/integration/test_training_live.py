"""The learning loop's second half on the running system and the real model: updates train on
real samples, publish into vLLM without failing a request, and the behaviour the user asked for
becomes more likely — measured with log-probs, not sampling luck."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import openai
import pytest

pytestmark = pytest.mark.stack

PROMPTS = [
    "What is the capital of France?",
    "Name a fruit that is yellow.",
    "How many legs does a spider have?",
    "What colour is the sky on a clear day?",
    "Give me a word that rhymes with cat.",
    "What is 3 plus 4?",
    "Name a planet in our solar system.",
    "What do bees make?",
]
HINT = "Start your answer with 'Sure!'"


def _wait(stack, query: str, params: tuple, check, timeout: float = 600) -> list:
    deadline = time.monotonic() + timeout
    rows: list = []
    while time.monotonic() < deadline:
        rows = stack.sql(query, params)
        if check(rows):
            return rows
        time.sleep(2)
    raise AssertionError(f"timed out; last rows: {rows}")


def _sure_logprob(stack, model: str) -> float:
    """Mean log-prob of the opening "Sure!" after each prompt, teacher-forced through vLLM."""
    from transformers import AutoTokenizer

    from tests.helpers import ROOT

    tokenizer = AutoTokenizer.from_pretrained(
        str(ROOT / "var" / "models" / "SmolLM2-135M-Instruct")
    )
    total = 0.0
    for prompt in PROMPTS[:4]:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True
        )
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        sure = tokenizer.encode("Sure!", add_special_tokens=False)
        response = httpx.post(
            stack.vllm_url + "/completions",
            timeout=120,
            json={
                "model": model,
                "prompt": ids + sure,
                "max_tokens": 1,
                "echo": True,
                "logprobs": 0,
                "temperature": 0,
            },
        )
        assert response.status_code == 200, response.text
        logprobs = response.json()["choices"][0]["logprobs"]["token_logprobs"]
        total += sum(logprobs[len(ids) : len(ids) + len(sure)])
    return total / 4


def test_feedback_trains_new_versions_that_prefer_what_the_user_asked_for(
    stack, stack_api_key
) -> None:
    base_sure = _sure_logprob(stack, "base")
    client = openai.OpenAI(
        base_url=stack.web_url + "/v1", api_key=stack_api_key, max_retries=0, timeout=120
    )
    headers = {"Authorization": f"Bearer {stack_api_key}"}
    ids = []
    for index, prompt in enumerate(PROMPTS):
        completion = client.chat.completions.create(
            model="parley",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=24,
            temperature=0.7,
            seed=index,
            extra_headers={"X-Session-Id": f"sure-{index}"},
        )
        text = completion.choices[0].message.content or ""
        good = text.strip().startswith("Sure!")
        body = {"completion_id": completion.id, "rating": 1 if good else -1}
        if not good:
            body |= {"comment": HINT, "correction": "Sure! " + text.strip()}
        assert (
            httpx.post(
                stack.web_url + "/v1/feedback", json=body, headers=headers, timeout=30
            ).status_code
            == 200
        )
        ids.append(completion.id)

    # Every one of our samples is trained exactly once, by one or more updates.
    rows = _wait(
        stack,
        (
            "SELECT s.status, s.update_id FROM learning_sample s "
            "JOIN chat_message m ON m.id = s.message_id "
            "WHERE m.completion_id = ANY(%s) AND s.status IN ('ready', 'consumed')"
        ),
        (ids,),
        lambda r: len(r) == len(PROMPTS) and all(status == "consumed" for status, _ in r),
    )
    updates = sorted({update for _, update in rows})
    finished = stack.sql(
        "SELECT u.id, u.status, v.number, v.status, jsonb_array_length(u.metrics) "
        "FROM learning_trainingupdate u JOIN learning_policyversion v "
        "ON v.id = u.produced_version_id WHERE u.id = ANY(%s) ORDER BY u.id",
        (updates,),
    )
    assert all(status == "done" and steps > 0 for _, status, _, _, steps in finished), finished
    live = _wait(
        stack,
        "SELECT number FROM learning_policyversion WHERE status = 'live'",
        (),
        lambda r: r and r[0][0] >= finished[-1][2],
    )[0][0]
    metrics = stack.sql(
        "SELECT metrics FROM learning_trainingupdate WHERE id = %s", (updates[-1],)
    )[0][0]
    assert {
        "loss",
        "clip_fraction",
        "kl",
        "tokens",
        "seconds",
        "logprob_gap_mean",
        "logprob_gap_max",
    } <= set(metrics[0])

    # vLLM serves the new version: the preferred opening is now more likely than under the base.
    served = [m["id"] for m in httpx.get(stack.vllm_url + "/models", timeout=10).json()["data"]]
    assert f"parley-v{live}" in served
    live_sure = _sure_logprob(stack, f"parley-v{live}")
    print(f"mean log-prob of 'Sure!' opening: base {base_sure:.2f}, v{live} {live_sure:.2f}")
    assert live_sure > base_sure + 0.5

    # A publish (rollback to the base and forward again) fails no request in flight.
    def stream(i: int) -> int:
        with httpx.stream(
            "POST",
            stack.web_url + "/v1/chat/completions",
            headers=headers,
            timeout=300,
            json={
                "model": "parley",
                "stream": True,
                "max_tokens": 16,
                "messages": [{"role": "user", "content": f"Say a number bigger than {i}."}],
            },
        ) as response:
            chunks = [line for line in response.iter_lines() if line.startswith("data: ")]
            return response.status_code if chunks and chunks[-1] == "data: [DONE]" else 599

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        futures = [pool.submit(stream, i) for i in range(20)]
        time.sleep(0.5)
        stack.manage("publish_version", "0")
        stack.manage("publish_version", str(live))
        statuses = [f.result() for f in futures]
    assert statuses == [200] * 20
    assert stack.sql("SELECT number FROM learning_policyversion WHERE status = 'live'", ()) == [
        (live,)
    ]
