"""A logging proxy between an agent and Parley's /v1: what the agent really sent, what came back.

Every request is passed on unchanged and its answer streamed back chunk by chunk as it arrives
(so the agent sees Parley's real streaming); each exchange is kept as an ``Exchange``: the
request's size, top-level fields, tools, system prompt and headers, and the answer's status,
size, error code, whether it streamed, and the text and tool calls it carried.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

# Headers that describe one hop, not the request: never passed on.
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}


@dataclass
class Exchange:
    """One request through the proxy and its answer."""

    method: str
    path: str
    request_bytes: int
    fields: dict[str, Any] = field(default_factory=dict)  # top-level fields, lists summarised
    tools: list[str] = field(default_factory=list)
    tools_bytes: int = 0
    messages: int = 0
    roles: list[str] = field(default_factory=list)
    system_chars: int = 0
    headers: list[str] = field(default_factory=list)  # names only: the key stays out of logs
    session_headers: dict[str, str] = field(default_factory=dict)
    status: int = 0
    response_bytes: int = 0
    streamed: bool = False
    chunks: int = 0
    error_code: str | None = None
    error_message: str | None = None
    text: str = ""
    tool_calls: list[str] = field(default_factory=list)
    tool_arguments: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    seconds: float = 0.0
    forced_tool: str | None = None
    body: dict[str, Any] | None = field(default=None, repr=False)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("body")
        return data


def describe_request(exchange: Exchange, body: Any) -> None:
    """Fill the request half of ``exchange`` from a parsed JSON body."""
    if not isinstance(body, dict):
        return
    exchange.body = body
    for name, value in body.items():
        if isinstance(value, list):
            exchange.fields[name] = f"<{len(value)} items>"
        elif isinstance(value, str) and len(value) > 80:
            exchange.fields[name] = f"<{len(value)} characters>"
        else:
            exchange.fields[name] = value
    tools = body.get("tools") or []
    exchange.tools = [str((t.get("function") or {}).get("name")) for t in tools]
    exchange.tools_bytes = len(json.dumps(tools)) if tools else 0
    messages = body.get("messages") or []
    exchange.messages = len(messages)
    exchange.roles = [str(m.get("role")) for m in messages if isinstance(m, dict)]
    exchange.system_chars = sum(
        len(_text(m.get("content")))
        for m in messages
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def describe_answer(exchange: Exchange, raw: bytes, *, streamed: bool) -> None:
    """Fill the answer half of ``exchange`` from the bytes that went back."""
    exchange.response_bytes = len(raw)
    exchange.streamed = streamed
    payloads: list[Any] = []
    if streamed:
        for line in raw.decode("utf-8", "replace").splitlines():
            if line.startswith("data: ") and line[6:].strip() != "[DONE]":
                try:
                    payloads.append(json.loads(line[6:]))
                except ValueError:
                    continue
        exchange.chunks = len(payloads)
    else:
        try:
            payloads = [json.loads(raw)]
        except ValueError:
            return
    calls: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for payload in payloads:
        if not isinstance(payload, dict):
            continue
        if isinstance(payload.get("error"), dict):
            exchange.error_code = payload["error"].get("code")
            exchange.error_message = payload["error"].get("message")
        exchange.usage = payload.get("usage") or exchange.usage
        for choice in payload.get("choices") or []:
            part = choice.get("delta") or choice.get("message") or {}
            exchange.text += part.get("content") or ""
            for index, call in enumerate(part.get("tool_calls") or []):
                function = call.get("function") or {}
                at = call.get("index", index)
                if function.get("name"):
                    calls[at] = function["name"]
                arguments[at] = arguments.get(at, "") + (function.get("arguments") or "")
            exchange.finish_reason = choice.get("finish_reason") or exchange.finish_reason
    exchange.tool_calls = [calls[i] for i in sorted(calls)]
    exchange.tool_arguments = [arguments.get(i, "") for i in sorted(calls)]


class LoggingProxy:
    """An HTTP proxy to ``upstream`` on 127.0.0.1, run in a thread of its own.

    ``force_tool``: the next chat request that offers a tool of that name goes on with
    ``tool_choice`` naming it (once, then the proxy passes requests on unchanged again). A
    small model seldom calls a tool by itself; forced, the real model still writes the call
    (vLLM's guided decoding), so the agent's tool round trip through Parley is exercised.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self.force_tool: str | None = None
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LoggingProxy:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the logging proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        timeout = aiohttp.ClientTimeout(total=None, sock_read=900)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            self._session = session
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()  # requests still in flight finish before the session closes

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        raw = await request.read()
        exchange = Exchange(method=request.method, path=request.path, request_bytes=len(raw))
        exchange.headers = sorted(name.lower() for name in request.headers)
        exchange.session_headers = {
            name: value
            for name, value in request.headers.items()
            if name.lower().startswith(("x-session", "x-turn", "x-openclaw"))
        }
        try:
            describe_request(exchange, json.loads(raw) if raw else None)
        except ValueError:
            pass
        if self.force_tool and self.force_tool in exchange.tools and exchange.body is not None:
            forced = {"type": "function", "function": {"name": self.force_tool}}
            raw = json.dumps({**exchange.body, "tool_choice": forced}).encode()
            exchange.forced_tool, self.force_tool = self.force_tool, None
        self.exchanges.append(exchange)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        upstream = self.upstream + request.path_qs
        async with self._session.request(
            request.method, upstream, data=raw, headers=headers
        ) as answer:
            exchange.status = answer.status
            streamed = answer.headers.get("Content-Type", "").startswith("text/event-stream")
            response = web.StreamResponse(status=answer.status)
            for name, value in answer.headers.items():
                if name.lower() not in HOP_HEADERS | {"content-encoding"}:
                    response.headers[name] = value
            await response.prepare(request)
            received = bytearray()
            async for data in answer.content.iter_any():
                received += data
                await response.write(data)
            await response.write_eof()
        describe_answer(exchange, bytes(received), streamed=streamed)
        exchange.seconds = round(time.monotonic() - started, 2)
        return response
