"""Asking an OpenAI-compatible judge model for m completions of one prompt.

``batched=True`` sends one request with ``n=m`` (vLLM shares the prompt's prefill across the
m samples); ``batched=False`` sends m separate requests. bench/judging.py compares the two.
``priority`` puts the judge's requests behind chat's on a shared vLLM server.
``choices`` constrains every reply to one of the given strings with vLLM's structured outputs
(``structured_outputs.choice``); ``constrained=False`` is for a server without that field.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx


class JudgeUnavailable(RuntimeError):
    """The judge endpoint did not answer; the task retries later."""


class JudgeRejected(ValueError):
    """The judge refused this request (a 4xx such as a context too long): asking again would
    get the same answer, so the turn is recorded as unjudgeable instead of retried."""


RETRYABLE_STATUS = frozenset({408, 429})
"""4xx answers that mean "not now" rather than "never": a timeout and throttling."""


@dataclass(frozen=True)
class JudgeEndpoint:
    base_url: str
    model: str
    api_key: str = ""
    max_tokens: int = 256
    temperature: float = 0.7
    timeout_s: float = 300.0
    constrained: bool = True
    # vLLM's request priority (lower = earlier; needs `--scheduling-policy priority` on the
    # server unless 0, which is therefore not sent). The judge asks behind chat (0).
    priority: int = 0


def complete_n(
    endpoint: JudgeEndpoint,
    messages: list[dict[str, str]],
    n: int,
    *,
    batched: bool = True,
    choices: tuple[str, ...] | None = None,
) -> list[str]:
    """n sampled replies of the judge to ``messages`` (texts, in order)."""
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    url = endpoint.base_url.rstrip("/") + "/chat/completions"
    body = {
        "model": endpoint.model,
        "messages": messages,
        "max_tokens": endpoint.max_tokens,
        "temperature": endpoint.temperature,
    }
    if choices and endpoint.constrained:
        body["structured_outputs"] = {"choice": list(choices)}
    if endpoint.priority:
        body["priority"] = endpoint.priority
    try:
        with httpx.Client(timeout=endpoint.timeout_s, headers=headers) as client:
            if batched:
                return _texts(client.post(url, json={**body, "n": n}))
            return [text for _ in range(n) for text in _texts(client.post(url, json=body))]
    except httpx.TransportError as exc:
        raise JudgeUnavailable(f"judge at {url} unreachable: {exc}") from exc


def _texts(response: httpx.Response) -> list[str]:
    status = response.status_code
    if status >= 500 or status in RETRYABLE_STATUS:
        raise JudgeUnavailable(f"judge failed with {status}")
    if status >= 400:
        raise JudgeRejected(f"judge refused the request with {status}: {response.text[:300]}")
    response.raise_for_status()
    choices = sorted(response.json()["choices"], key=lambda c: c["index"])
    return [c["message"].get("content") or "" for c in choices]
