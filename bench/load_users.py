"""The load benchmark's users (``bench.load``): one signs up and chats in the browser's
websocket, one asks through /v1 with an API key; each gives feedback after every answer and
tallies what it saw."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

ANSWER = re.compile(r'class="message assistant status-(\w+)" id="message-(\d+)"')
PROMPTS = [
    "Name a colour.",
    "Say hello in French.",
    "What is 3 plus 4?",
    "Give me one word for fast.",
    "Name a fruit.",
]


@dataclass
class Tally:
    """What the users saw: latencies per door, failures with their reason, feedback sent."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: {"websocket": [], "api": []})
    requests: int = 0
    failures: list[str] = field(default_factory=list)
    feedback_sent: list[str] = field(default_factory=list)  # the unique comment of each

    def fail(self, what: str) -> None:
        self.failures.append(what)


async def _csrf(client: httpx.AsyncClient, path: str) -> str:
    await client.get(path)
    return client.cookies["csrftoken"]


async def _sign_up(web_url: str, username: str) -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=web_url, timeout=120)
    password = "load-passphrase-2718"
    token = await _csrf(client, "/accounts/signup/")
    response = await client.post(
        "/accounts/signup/",
        data={
            "username": username,
            "password1": password,
            "password2": password,
            "csrfmiddlewaretoken": token,
        },
        headers={"Referer": web_url + "/accounts/signup/"},
    )
    if response.status_code != 302 or "sessionid" not in client.cookies:
        raise RuntimeError(f"sign-up of {username} failed ({response.status_code})")
    return client


async def websocket_user(
    web_url: str, user: int, rounds: int, max_tokens: int, tally: Tally, tag: str
) -> None:
    """The chat page: a conversation per round, one message, the streamed answer, a comment."""
    from websockets.asyncio.client import connect

    client = await _sign_up(web_url, f"load-{tag}-{user}")
    try:
        for round_ in range(rounds):
            tally.requests += 1
            started = time.perf_counter()
            try:
                token = client.cookies["csrftoken"]
                response = await client.post(
                    "/chat/new/",
                    data={"csrfmiddlewaretoken": token},
                    headers={"Referer": web_url + "/chat/"},
                )
                conversation = int(re.search(r"/chat/(\d+)/", response.headers["location"])[1])
                url = web_url.replace("http", "ws", 1) + f"/ws/chat/{conversation}/"
                cookie = f"sessionid={client.cookies['sessionid']}"
                frames = []
                async with connect(
                    url, origin=web_url, additional_headers={"Cookie": cookie}
                ) as ws:
                    prompt = PROMPTS[(user + round_) % len(PROMPTS)]
                    await ws.send(json.dumps({"action": "send", "content": prompt}))
                    async for frame in ws:
                        frames.append(str(frame))
                        if 'data-state="idle"' in frames[-1]:
                            break
                finals = ANSWER.findall(frames[-1])
                if not finals or finals[-1][0] != "complete":
                    tally.fail(f"websocket user {user}: answer ended {finals or frames[-1][:200]}")
                    continue
                tally.latencies["websocket"].append(time.perf_counter() - started)
                comment = f"load-{tag}-ws-{user}-{round_}"
                response = await client.post(
                    f"/chat/messages/{finals[-1][1]}/feedback/",
                    data={"comment": comment, "csrfmiddlewaretoken": token},
                    headers={"Referer": web_url + f"/chat/{conversation}/", "HX-Request": "true"},
                )
                if response.status_code != 200:
                    tally.fail(f"websocket user {user}: feedback {response.status_code}")
                    continue
                tally.feedback_sent.append(comment)
            except Exception as exc:  # noqa: BLE001 - every failure is counted, none stops the run
                tally.fail(f"websocket user {user}: {type(exc).__name__}: {exc}")
    finally:
        await client.aclose()


async def api_user(
    web_url: str, api_key: str, user: int, rounds: int, max_tokens: int, tally: Tally, tag: str
) -> None:
    """An OpenAI client: a chat completion (streamed every other time), then /v1/feedback."""
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx.AsyncClient(base_url=web_url, timeout=300, headers=headers) as client:
        for round_ in range(rounds):
            tally.requests += 1
            body = {
                "model": "parley",
                "max_tokens": max_tokens,
                "temperature": 0.7,
                "stream": round_ % 2 == 1,
                "messages": [{"role": "user", "content": PROMPTS[(user + round_) % len(PROMPTS)]}],
            }
            started = time.perf_counter()
            try:
                completion_id = await _complete(client, body, session=f"{tag}-{user}-{round_}")
                tally.latencies["api"].append(time.perf_counter() - started)
                comment = f"load-{tag}-api-{user}-{round_}"
                response = await client.post(
                    "/v1/feedback",
                    json={"completion_id": completion_id, "rating": 1, "comment": comment},
                )
                if response.status_code != 200:
                    tally.fail(f"api user {user}: feedback {response.status_code} {response.text}")
                    continue
                tally.feedback_sent.append(comment)
            except Exception as exc:  # noqa: BLE001
                tally.fail(f"api user {user}: {type(exc).__name__}: {exc}")


async def _complete(client: httpx.AsyncClient, body: dict[str, Any], session: str) -> str:
    headers = {"X-Session-Id": session}
    if not body["stream"]:
        response = await client.post("/v1/chat/completions", json=body, headers=headers)
        response.raise_for_status()
        return response.json()["id"]
    completion_id = ""
    async with client.stream(
        "POST", "/v1/chat/completions", json=body, headers=headers
    ) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    raise RuntimeError(chunk["error"]["message"])
                completion_id = chunk["id"]
    if not completion_id:
        raise RuntimeError("the stream carried no chunk")
    return completion_id
