"""Load on the serving engine for the training benchmarks: answers sampled with the ids and
log-probs a training sample keeps, and clients streaming long answers the whole time."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

PROMPTS = (
    "What is a good way to learn a new language?",
    "Explain what a compiler does.",
    "Give me three tips for sleeping better.",
    "Why is the sky blue?",
    "How do I make a simple tomato sauce?",
    "What should I pack for a weekend hike?",
    "Describe the water cycle.",
    "How does a bicycle stay upright?",
    "What is the difference between weather and climate?",
    "Suggest a name for a small bakery.",
    "How do vaccines work?",
    "What is a prime number?",
    "Write a short note thanking a colleague.",
    "How can I save money on groceries?",
    "What causes the seasons?",
    "Explain recursion to a beginner.",
    "What is photosynthesis?",
    "How do I start running?",
)
HINT = "Answer in one short paragraph and start with 'Sure!'."
CORRECTION = "Sure! Here is a short answer."
CLIENT_PROMPT = "Tell me a long story about a lighthouse keeper and the sea."


def sampled_answers(url: str, headers: dict[str, str], count: int) -> list[dict[str, Any]]:
    """``count`` real answers with the ids and log-probs the engine sampled."""
    import httpx

    rows = []
    for index in range(count):
        messages = [{"role": "user", "content": PROMPTS[index % len(PROMPTS)]}]
        body = {
            "model": "base",
            "messages": messages,
            "max_tokens": 160,
            "temperature": 0.7,
            "seed": index,
            "stream": True,
            "logprobs": True,
            "return_token_ids": True,
        }
        prompt_ids: list[int] = []
        token_ids: list[int] = []
        logprobs: list[float] = []
        with httpx.stream(
            "POST", f"{url}/chat/completions", json=body, headers=headers, timeout=120
        ) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                prompt_ids = prompt_ids or list(chunk.get("prompt_token_ids") or [])
                for choice in chunk.get("choices") or []:
                    token_ids.extend(choice.get("token_ids") or [])
                    content = (choice.get("logprobs") or {}).get("content") or []
                    logprobs.extend(float(item["logprob"]) for item in content)
        rows.append(
            {
                "prompt_messages": messages,
                "prompt_token_ids": prompt_ids,
                "response_token_ids": token_ids,
                "response_logprobs": logprobs,
                "reward": 1.0 if index % 3 else -1.0,
                "hint": HINT if index % 2 else None,
                "correction": CORRECTION if index == 2 else "",
                "group_id": None,
                "temperature": 0.7,
            }
        )
    return rows


class Clients:
    """``count`` clients streaming long answers from the engine until stopped; the tokens they
    received and over what time."""

    def __init__(self, url: str, headers: dict[str, str], count: int) -> None:
        self.url, self.headers, self.count = url, headers, count
        self.tokens = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._started = 0.0
        self.seconds = 0.0

    async def _client(self, index: int) -> None:
        import httpx

        body = {
            "model": "base",
            "messages": [{"role": "user", "content": CLIENT_PROMPT}],
            "max_tokens": 256,
            "temperature": 0.8,
            "stream": True,
        }
        async with httpx.AsyncClient(timeout=120) as client:
            while not self._stop.is_set():
                async with client.stream(
                    "POST", f"{self.url}/chat/completions", json=body, headers=self.headers
                ) as response:
                    async for line in response.aiter_lines():
                        if self._stop.is_set():
                            return
                        if line.startswith("data: {") and '"content"' in line:
                            self.tokens += 1

    async def _run(self) -> None:
        await asyncio.gather(*(self._client(i) for i in range(self.count)))

    def __enter__(self) -> Clients:
        self._started = time.monotonic()
        self._thread.start()
        time.sleep(3)  # every client streaming before the update starts
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self._started
        self._stop.set()
        self._thread.join(timeout=30)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0
