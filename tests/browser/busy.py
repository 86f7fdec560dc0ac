"""A busy machine for the browser tests: other people's answers streaming from the serving
engine while the test runs, and work waiting on the judge queue."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import redis

PROMPT = "Tell me a long story about a lighthouse keeper and a storm, with many details."


@contextmanager
def engine_busy(stack, *, streams: int = 2, max_tokens: int = 200) -> Iterator[list[int]]:
    """``streams`` answers at once straight from the engine, each asked again as soon as it
    ends, until the block ends; yields the count of answers finished so far."""
    stop = threading.Event()
    finished = [0]

    def one() -> None:
        while not stop.is_set():
            request = {
                "model": "base",
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": max_tokens,
                "temperature": 0.9,
                "stream": True,
            }
            try:
                with httpx.stream(
                    "POST",
                    stack.vllm_url + "/chat/completions",
                    json=request,
                    headers=stack.vllm_headers,
                    timeout=300,
                ) as response:
                    for _ in response.iter_lines():
                        if stop.is_set():
                            return  # leaving the stream closes it: the engine drops it
                finished[0] += 1
            except httpx.HTTPError:
                time.sleep(0.5)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(streams)]
    for thread in threads:
        thread.start()
    try:
        yield finished
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


def stack_redis(stack) -> redis.Redis:
    """The running system's Redis (its broker and channel layer)."""
    assert stack.var_dir is not None
    url = json.loads((stack.var_dir / "run" / "infra.json").read_text())["redis_url"]
    return redis.Redis.from_url(url)


LATER_WORK = "judge\x06\x166"
"""The judge queue's list of work that goes after judging and the answers to compare
(webapp/celery.py: kombu's priority step 6)."""


def queue_title_backlog(stack, *, conversation_id: int, count: int) -> None:
    """``count`` title suggestions on the judge queue: each asks the engine, behind chat."""
    stack.manage(
        "shell",
        "-c",
        "from webapp.core.outbox import Task, send\n"
        f"for _ in range({count}): send(Task.SUGGEST_CONVERSATION_TITLE, ({conversation_id},))",
    )
