"""Time to first token: the browser chat's websocket against calling vLLM directly.

For each prompt, once through Parley (a signed-in websocket on a new conversation, exactly what
the chat page does: the message is stored, the answer placeholder is stored, then the first
token arrives as an HTML fragment) and once straight to vLLM with the same client code and the
same request, alternating so that drift hits both equally. Both stop after the first token.
Prints each pair, the medians, their ratio and the median time Parley adds (target: < 50 ms).

    python bench/chat_ttft.py                       # starts the whole stack itself (~1 min)
    python bench/chat_ttft.py --web-url http://127.0.0.1:8000 --vllm-url http://127.0.0.1:8001/v1
    (with VLLM_API_KEY set to the key that vLLM was started with: var/vllm_api_key)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPTS = [
    "What is the capital of France?",
    "Name three primary colours.",
    "Give me a synonym for happy.",
    "How many legs does a spider have?",
    "Say hello in Spanish.",
    "What is 7 times 8?",
    "Suggest a name for a grey cat.",
    "What does CPU stand for?",
    "Which planet is closest to the sun?",
    "Write one sentence about the sea.",
]
# The first repaint of the answer that shows any text (it is the whole answer so far, rendered).
FIRST_TOKEN = re.compile(r'-stream" class="stream" hx-swap-oob="innerHTML">(.*\S.*)</div>', re.S)


def sign_in(web_url: str, username: str, password: str, signup: bool) -> httpx.Client:
    client = httpx.Client(base_url=web_url, follow_redirects=False, timeout=30)
    path = "/accounts/signup/" if signup else "/accounts/login/"
    client.get(path)
    data = {"username": username, "csrfmiddlewaretoken": client.cookies["csrftoken"]}
    data.update(
        {"password1": password, "password2": password} if signup else {"password": password}
    )
    response = client.post(path, data=data, headers={"Referer": web_url + path})
    if response.status_code != 302 or "sessionid" not in client.cookies:
        raise SystemExit(f"could not sign in as {username!r} at {web_url} ({response.status_code})")
    return client


def new_conversation(client: httpx.Client) -> int:
    response = client.post(
        "/chat/new/",
        data={"csrfmiddlewaretoken": client.cookies["csrftoken"]},
        headers={"Referer": str(client.base_url) + "/chat/"},
    )
    return int(re.search(r"/chat/(\d+)/", response.headers["location"]).group(1))


async def parley_ttft(client: httpx.Client, prompt: str) -> float:
    from websockets.asyncio.client import connect

    conversation = new_conversation(client)
    web = str(client.base_url).rstrip("/")
    url = web.replace("http", "ws", 1) + f"/ws/chat/{conversation}/"
    cookie = f"sessionid={client.cookies['sessionid']}"
    async with connect(url, origin=web, additional_headers={"Cookie": cookie}) as socket:
        started = time.perf_counter()
        await socket.send(json.dumps({"action": "send", "content": prompt}))
        first = None
        async for frame in socket:
            if first is None and FIRST_TOKEN.search(str(frame)):
                first = time.perf_counter() - started
                await socket.send(json.dumps({"action": "stop"}))
            if 'data-state="idle"' in str(frame):
                break
    if first is None:
        raise SystemExit(f"Parley sent no token for {prompt!r}")
    return first


async def direct_ttft(vllm_url: str, prompt: str, params: dict[str, object]) -> float:
    from webapp.inference import stream_chat

    started = time.perf_counter()
    stream = stream_chat(
        [{"role": "user", "content": prompt}], model="base", params=params, base_url=vllm_url
    )
    try:
        async for chunk in stream:
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
                return time.perf_counter() - started
    finally:
        await stream.aclose()
    raise SystemExit(f"vLLM sent no token for {prompt!r}")


async def measure(args: argparse.Namespace, web_url: str, vllm_url: str) -> None:
    client = sign_in(web_url, args.username, args.password, signup=not args.login)
    params = {"max_tokens": args.max_tokens, "temperature": args.temperature}
    await parley_ttft(client, "Hello!")  # warm-up: connections, templates, first query plans
    await direct_ttft(vllm_url, "Hello!", params)
    rows = []
    for prompt in PROMPTS[: args.prompts]:
        parley = await parley_ttft(client, prompt)
        direct = await direct_ttft(vllm_url, prompt, params)
        rows.append((prompt, direct, parley))
        print(f"{direct * 1000:8.1f} ms direct {parley * 1000:8.1f} ms Parley   {prompt}")
    direct_median = statistics.median(r[1] for r in rows)
    parley_median = statistics.median(r[2] for r in rows)
    added = statistics.median((r[2] - r[1]) * 1000 for r in rows)
    print(
        f"median TTFT: vLLM direct {direct_median * 1000:.1f} ms, "
        f"Parley websocket {parley_median * 1000:.1f} ms"
    )
    print(f"ratio Parley/direct: {parley_median / direct_median:.2f}")
    print(
        f"median added by Parley: {added:.1f} ms (target < 50 ms) "
        f"-> {'OK' if added < 50 else 'OVER TARGET'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--web-url", help="a running Parley (default: start the stack here)")
    parser.add_argument("--vllm-url", help="its vLLM server (send VLLM_API_KEY), e.g. :8001/v1")
    parser.add_argument("--prompts", type=int, default=len(PROMPTS))
    parser.add_argument("--username", default=f"bench-{int(time.time())}")
    parser.add_argument("--password", default="bench-passphrase-2718")
    parser.add_argument("--login", action="store_true", help="log in instead of signing up")
    parser.add_argument("--max-tokens", type=int, default=512, help="as the web chat's default")
    parser.add_argument("--temperature", type=float, default=0.7)
    args = parser.parse_args()
    if args.web_url and args.vllm_url:
        asyncio.run(measure(args, args.web_url.rstrip("/"), args.vllm_url.rstrip("/")))
        return

    import secrets

    from bench.launching import Launcher, clean_env, free_port

    web_port, vllm_port = free_port(), free_port()
    # The direct-to-vLLM requests (webapp.inference, in this process) send the stack's key.
    os.environ["VLLM_API_KEY"] = key = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="parley-bench-") as var:
        launcher = Launcher(
            clean_env(
                PARLEY_VAR_DIR=var,
                PARLEY_PORT=str(web_port),
                VLLM_PORT=str(vllm_port),
                VLLM_API_KEY=key,
            )
        )
        try:
            print("starting the stack…", flush=True)
            launcher.wait_for("Parley is ready at", timeout=900)
            asyncio.run(
                measure(args, f"http://127.0.0.1:{web_port}", f"http://127.0.0.1:{vllm_port}/v1")
            )
        finally:
            try:
                launcher.interrupt()
            finally:
                launcher.kill()


if __name__ == "__main__":
    main()
