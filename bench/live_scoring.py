"""Scoring the running system's versions for the live personalization benchmark
(``bench.personalize``): the held-out prompts answered greedily by one version and checked
against the preference, the same asked through Parley's /v1 as a key's owner, and a version's
probe perplexity against the base's."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import httpx

from bench.answering import BROKEN_EXAMPLES
from bench.common import RunningSystem, sql
from bench.preferences import Preference, answer_flaws
from bench.replay_options import default_model_dir


def ppl_ratio(system: RunningSystem, number: int) -> float | None:
    rows = sql(
        system.var_dir,
        "SELECT number, probe_metrics FROM learning_policyversion WHERE number IN (0, %s)",
        (number,),
    )
    metrics = {n: m for n, m in rows}
    base, this = metrics.get(0, {}).get("probe_ppl"), metrics.get(number, {}).get("probe_ppl")
    if number == 0:
        return 1.0
    return this / base if base and this else None


def evaluate(
    system: RunningSystem, preference: Preference, prompts: list[str], number: int, max_tokens: int
) -> tuple[float, list[str]]:
    """(share of held-out prompts whose greedy answer meets the preference, the start of each
    broken answer: looping or empty ones, which meet no preference)."""
    model = "base" if number == 0 else f"parley-v{number}"
    bodies = [
        {
            "model": model,
            "stream": True,
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": p}],
        }
        for p in prompts
    ]
    answers = asyncio.run(
        _answers(system.vllm_url + "/chat/completions", bodies, system.vllm_headers)
    )
    ids = [answer_token_ids(system, a) for a in answers]
    broken = [a[:100] for a, i in zip(answers, ids, strict=True) if answer_flaws(a, i)]
    met = sum(preference.meets(a, i) for a, i in zip(answers, ids, strict=True))
    return met / len(answers), broken[:BROKEN_EXAMPLES]


@functools.lru_cache(maxsize=4)
def _tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def answer_token_ids(system: RunningSystem, answer: str) -> list[int]:
    """The answer's tokens under the served base model's tokenizer (the text re-encoded: the
    loop check needs the n-grams, not the exact ids vLLM sampled)."""
    tokenizer = _tokenizer(default_model_dir(system.env))
    return tokenizer.encode(answer, add_special_tokens=False)


def evaluate_api(
    system: RunningSystem, key: str, preference: Preference, prompts: list[str], max_tokens: int
) -> float:
    """The same score, asked through Parley's /v1 as the key's owner (model="parley")."""
    bodies = [
        {
            "model": "parley",
            "temperature": 0,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": p}],
        }
        for p in prompts
    ]
    headers = {"Authorization": f"Bearer {key}", "X-Turn-Type": "side"}
    answers = asyncio.run(_answers(system.web_url + "/v1/chat/completions", bodies, headers))
    return sum(preference.meets(a, answer_token_ids(system, a)) for a in answers) / len(answers)


async def _answers(url: str, bodies: list[dict[str, Any]], headers: dict[str, str]) -> list[str]:
    async with httpx.AsyncClient(timeout=600, headers=headers) as client:

        async def one(body: dict[str, Any]) -> str:
            body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            response = await client.post(url, json=body)
            if response.is_error:  # the body says why (the OpenAI error format on /v1)
                raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:500]}")
            return response.json()["choices"][0]["message"]["content"] or ""

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def api_scores(
    system: RunningSystem,
    preference: Preference,
    prompts: list[str],
    eval_tokens: int,
    control_key: str | None,
) -> tuple[float, float | None]:
    own = evaluate_api(system, system.api_key, preference, prompts, eval_tokens)
    control = (
        evaluate_api(system, control_key, preference, prompts, eval_tokens) if control_key else None
    )
    return own, control
