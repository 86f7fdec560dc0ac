"""The learning loop's second half on the running system and the real model: updates train on
real samples, publish into vLLM without failing a request, and the behaviour the user asked for
becomes more likely — measured with log-probs, not sampling luck."""

from __future__ import annotations

import concurrent.futures
import time

import httpx
import openai
import pytest

from tests.helpers import stack_rows_when

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


def _sure_logprob(adapter_dir: str | None) -> float:
    """Mean log-prob of the opening "Sure!" after each prompt, teacher-forced, for the base
    model or the base with a published adapter (the same files vLLM serves)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.helpers import ROOT

    base_dir = str(ROOT / "var" / "models" / "SmolLM2-135M-Instruct")
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, adapter_dir)
    model.eval()
    sure = tokenizer.encode("Sure!", add_special_tokens=False)
    total = 0.0
    for prompt in PROMPTS[:4]:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_dict=True
        )["input_ids"]
        full = torch.tensor([list(ids) + sure])
        with torch.no_grad():
            logp = torch.log_softmax(model(full).logits[0, :-1].float(), dim=-1)
        targets = full[0, 1:]
        picked = logp[torch.arange(len(targets)), targets]
        total += float(picked[len(ids) - 1 :].sum())
    return total / 4


def _first_token_logprob(stack, model: str) -> float:
    response = httpx.post(
        stack.vllm_url + "/chat/completions",
        headers=stack.vllm_headers,
        timeout=120,
        json={
            "model": model,
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": True,
            "messages": [{"role": "user", "content": PROMPTS[0]}],
        },
    )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["logprobs"]["content"][0]["logprob"]


def test_feedback_trains_new_versions_that_prefer_what_the_user_asked_for(
    stack, stack_api_key
) -> None:
    base_sure = _sure_logprob(None)
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
    rows = stack_rows_when(
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
    # PARLEY_LEARNING_SCOPE=user (the default): the key's owner has a lineage of their own.
    owner = stack.sql(
        "SELECT c.owner_id FROM chat_message m JOIN chat_conversation c "
        "ON c.id = m.conversation_id WHERE m.completion_id = %s",
        (ids[0],),
    )[0][0]
    assert {n for _, _, n, _, _ in finished} <= {
        n
        for (n,) in stack.sql(
            "SELECT number FROM learning_policyversion WHERE owner_id = %s", (owner,)
        )
    }
    live_of_owner = (
        "SELECT number FROM learning_policyversion WHERE status = 'live' AND owner_id = %s"
    )
    live = stack_rows_when(
        stack, live_of_owner, (owner,), lambda r: r and r[0][0] >= finished[-1][2]
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
    served = [
        m["id"]
        for m in httpx.get(
            stack.vllm_url + "/models", headers=stack.vllm_headers, timeout=10
        ).json()["data"]
    ]
    assert f"parley-v{live}" in served
    adapter_dir = stack.sql(
        "SELECT adapter_path FROM learning_policyversion WHERE number = %s", (live,)
    )[0][0]
    live_sure = _sure_logprob(adapter_dir)
    # vLLM serves that adapter: its log-prob of the same greedy first token differs from the base.
    assert _first_token_logprob(stack, f"parley-v{live}") != _first_token_logprob(stack, "base")
    print(f"mean log-prob of 'Sure!' opening: base {base_sure:.2f}, v{live} {live_sure:.2f}")
    assert live_sure > base_sure + 0.5

    # A swap (the user's lineage reset to the shared model, then their version published
    # again) fails no request in flight.
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
        stack.manage(
            "shell",
            "-c",
            "from django.db import transaction\n"
            "from webapp.learning.workflows.publishing import policy_lineage_reset\n"
            f"with transaction.atomic(): policy_lineage_reset(owner_id={owner})",
        )
        stack.manage("publish_version", str(live))
        statuses = [f.result() for f in futures]
    assert statuses == [200] * 20
    assert stack.sql(live_of_owner, (owner,)) == [(live,)]
