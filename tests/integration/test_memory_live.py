"""Memory on the running system with the real model, engine and Celery workers: a memory added
through /v1 is in the very next request, every answer given it becomes a memory sample, and an
update distils them, its gate measuring the memory's gap."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.helpers import stack_rows_when

pytestmark = pytest.mark.stack

QUESTIONS = [
    "What should I cook tonight?",
    "Give me a tip for a rainy day.",
    "How do I stay focused while working?",
]


def test_a_memory_is_served_at_once_and_distilled_by_an_update(stack) -> None:
    key = stack.manage(
        "create_api_key", "--user", "sam", "--name", "memory", "--create-user"
    ).strip()
    headers = {"Authorization": f"Bearer {key}"}
    created = httpx.post(
        stack.web_url + "/v1/memories", json={"text": "Call me Sam"}, headers=headers, timeout=30
    )
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]

    client = openai.OpenAI(base_url=stack.web_url + "/v1", api_key=key, max_retries=0, timeout=120)
    ids = []
    for index, question in enumerate(QUESTIONS):
        completion = client.chat.completions.create(
            model="parley",
            messages=[{"role": "user", "content": question}],
            max_tokens=32,
            temperature=0.7,
            seed=index,
            extra_headers={"X-Session-Id": f"memory-{index}"},
        )
        ids.append(completion.id)
    # Given the memory: recorded with the answer, and in the prompt the engine tokenised.
    given = stack.sql(
        "SELECT memories, prompt_token_ids FROM chat_message WHERE completion_id = ANY(%s)", (ids,)
    )
    assert all(memories == [{"id": memory_id, "text": "Call me Sam"}] for memories, _ in given)
    plain = client.chat.completions.create(
        model="parley",
        messages=[{"role": "user", "content": QUESTIONS[0]}],
        max_tokens=1,
        extra_headers={"X-Parley-Memory": "off"},
    )
    (plain_prompt,) = stack.sql(
        "SELECT prompt_token_ids FROM chat_message WHERE completion_id = %s", (plain.id,)
    )[0]
    assert len(given[0][1]) > len(plain_prompt)  # the memory's tokens are in the served prompt

    # No feedback at all: each answer is a memory sample, and an update trains them.
    rows = stack_rows_when(
        stack,
        "SELECT s.kind, s.status, s.update_id FROM learning_sample s JOIN chat_message m "
        "ON m.id = s.message_id WHERE m.completion_id = ANY(%s)",
        (ids,),
        lambda r: len(r) == len(ids) and all(status == "consumed" for _, status, _ in r),
    )
    assert {kind for kind, _, _ in rows} == {"memory"}
    update = max(update for _, _, update in rows)
    status, summary = stack.sql(
        "SELECT status, summary FROM learning_trainingupdate WHERE id = %s", (update,)
    )[0]
    assert status == "done"
    (gap,) = [g for g in summary["memory_gaps"] if g["id"] == memory_id]
    assert gap["memory"] == "Call me Sam" and gap["base_gap"] != 0
    print(f"memory gap: candidate {gap['gap']:.3f}, base {gap['base_gap']:.3f} nats/token")
