"""The one async client for the vLLM servers: streaming chat, token ids and log-probs.

``stream_chat`` yields vLLM's chunks as they arrive (nothing is buffered), and
``CompletionAccumulator`` folds them into what Parley records: text, reasoning, tool calls,
the sampled token ids and their log-probs, finish reason and usage. The web chat and the
``/v1`` API are two front doors on this same generator. Closing the generator closes the HTTP
stream, which makes vLLM abort the request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from django.conf import settings

from webapp import replicas

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 300.0
ADAPTER_LOAD_TIMEOUT_S = 60.0
KEEPALIVE_TIMEOUT_S = 4.0
"""How long an idle pooled connection to vLLM is kept: under vLLM's own keep-alive
(``VLLM_HTTP_TIMEOUT_KEEP_ALIVE``, 5 s), so the client gives a connection up before the server
closes it. Kept for 60 s, a connection the server closed just as a request went out failed
that request (a live benchmark's one 503 in 386 requests, on a loaded machine)."""

log = logging.getLogger(__name__)


class ServingUnavailable(Exception):
    """No serving worker answered: the model server is down or restarting."""


class ServingError(Exception):
    """The model server refused the request (a 4xx); ``message`` is vLLM's explanation."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


_sessions: dict[int, tuple[asyncio.AbstractEventLoop, aiohttp.ClientSession]] = {}


def _session() -> aiohttp.ClientSession:
    """One pooled session per event loop (daphne runs one loop; tests may run several).

    aiohttp rather than httpx: relaying a stream costs a few times less CPU per chunk (its
    HTTP parser is in C and a read is not wrapped in an anyio cancel scope), and that CPU is
    taken from vLLM on a small machine.
    """
    loop = asyncio.get_running_loop()
    entry = _sessions.get(id(loop))
    if entry is None or entry[0] is not loop or entry[1].closed:
        session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=READ_TIMEOUT_S
            ),
            connector=aiohttp.TCPConnector(limit=256, keepalive_timeout=KEEPALIVE_TIMEOUT_S),
        )
        _sessions[id(loop)] = (loop, session)
        return session
    return entry[1]


def auth_headers() -> dict[str, str]:
    """vLLM's API key (``VLLM_API_KEY``) as a bearer token, on every call to it."""
    key = settings.VLLM_API_KEY
    return {"Authorization": f"Bearer {key}"} if key else {}


def server_url(base_url: str, path: str) -> str:
    """``path`` on the server of a replica's ``/v1`` base URL (its admin routes sit at the root).

    >>> server_url("http://127.0.0.1:8001/v1/", "/tokenize")
    'http://127.0.0.1:8001/tokenize'
    """
    return base_url.rstrip("/").removesuffix("/v1") + path


_loads: dict[tuple[str, str], asyncio.Future[float]] = {}


async def adapter_load(*, base_url: str, name: str, path: str) -> float:
    """Load an adapter folder into one replica under ``name``; the seconds it took.

    A replica knows only the adapters loaded into it since it started (a restart forgets the
    users' adapters; vLLM keeps up to --max-cpu-loras in memory and reloads an evicted one by
    itself). Requests that find the same adapter missing together share one load, and an
    adapter another request loaded meanwhile counts as loaded.
    """
    key = (base_url, name)
    pending = _loads.get(key)
    if pending is None:
        pending = asyncio.ensure_future(_load(base_url, name, path))
        _loads[key] = pending
        pending.add_done_callback(lambda _: _loads.pop(key, None))
    return await asyncio.shield(pending)


async def _load(base_url: str, name: str, path: str) -> float:
    url = server_url(base_url, "/v1/load_lora_adapter")
    started = time.perf_counter()
    body = {"lora_name": name, "lora_path": path}
    timeout = aiohttp.ClientTimeout(total=ADAPTER_LOAD_TIMEOUT_S)
    try:
        async with await _post(url, body, timeout=timeout) as response:
            text = await response.text()
    except (TimeoutError, aiohttp.ClientError) as exc:
        raise ServingUnavailable(f"the model server at {url} is not answering") from exc
    if response.status != 200 and "already" not in text.lower():
        raise ServingError(response.status, f"loading adapter {name} failed: {text[:300]}")
    seconds = time.perf_counter() - started
    log.info("loaded adapter %s into %s in %.3f s", name, base_url, seconds)
    return seconds


async def stream_chat(
    messages: list[dict[str, Any]],
    *,
    model: str,
    params: dict[str, Any] | None = None,
    base_url: str | None = None,
    adapter_path: str = "",
    lineage: str | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Stream a chat completion from vLLM, yielding each chunk (a dict) as it arrives.

    Always asks for the sampled token ids and their log-probs, which training needs.
    ``lineage``: the key of the lineage the request is for (``webapp.replicas.lineage_key``),
    which picks the replica: its home, then the next of its order when one does not answer
    before the first byte (``base_url`` names one replica instead).
    ``adapter_path``: the folder of the adapter ``model`` names; a replica that does not know
    that name yet (404) has it loaded first, and the request is sent again, once.
    """
    body = {
        **(params or {}),
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": False},
        "logprobs": True,
        "return_token_ids": True,
    }
    order = [base_url] if base_url else replicas.replica_order(lineage)
    response, url = await _open(order, body, adapter_path=adapter_path)
    complete = False
    try:
        pending = b""
        async for data in response.content.iter_any():
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    complete = True
                    continue
                chunk = json.loads(payload)
                if "error" in chunk:
                    error = chunk["error"]
                    raise ServingError(int(error.get("code") or 500), str(error.get("message")))
                yield chunk
        if not complete:  # vLLM ends every answer with [DONE]; the connection closed first
            raise ServingUnavailable(f"the model server at {url} stopped mid-answer")
    except (TimeoutError, aiohttp.ClientError) as exc:
        # Reset or silent mid-answer: the model server was killed or hangs.
        raise ServingUnavailable(f"the model server at {url} stopped answering") from exc
    finally:
        if complete:
            response.release()  # read to the end: the connection goes back to the pool
        else:
            response.close()  # closing the connection makes vLLM abort the request


TEMPLATE_ROOM_BYTES = 1024
"""Room for what the chat template adds around the messages (a default system prompt, each
message's role markers): more bytes than it ever adds tokens."""


def fits_for_certain(messages: list[dict[str, Any]], params: dict[str, Any], window: int) -> bool:
    """Whether the prompt and the answer asked for surely fit the context window, uncounted.

    A token of a byte-level tokenizer stands for at least one byte of the rendered prompt, so
    the messages and tools as JSON (no shorter than their text), plus the template's room, bound
    the prompt's tokens from above. Only a prompt near the window needs counting.

    >>> fits_for_certain([{"role": "user", "content": "Hi"}], {"max_tokens": 600}, 8192)
    True
    >>> fits_for_certain([{"role": "user", "content": "word " * 1600}], {"max_tokens": 600}, 8192)
    False
    """
    size = len(json.dumps([messages, params.get("tools")]).encode()) + TEMPLATE_ROOM_BYTES
    return size + int(params.get("max_tokens") or 0) <= window


async def prompt_tokens(
    messages: list[dict[str, Any]],
    *,
    params: dict[str, Any] | None = None,
    lineage: str | None = None,
) -> int | None:
    """The prompt's length in tokens as the model server renders it (vLLM's ``/tokenize``: the
    chat template and the tools included), with no prefill; None when no replica counts it.
    Every adapter shares the base model's tokenizer, so the base model counts."""
    params = params or {}
    body: dict[str, Any] = {"messages": messages, "add_generation_prompt": True}
    for name in ("tools", "chat_template_kwargs"):
        if params.get(name):
            body[name] = params[name]
    timeout = aiohttp.ClientTimeout(total=CONNECT_TIMEOUT_S * 3)
    for replica in replicas.replica_order(lineage):
        url = server_url(replica, "/tokenize")
        try:
            async with await _post(url, body, timeout=timeout) as response:
                if response.status == 200:
                    return int((await response.json())["count"])
        except (TimeoutError, aiohttp.ClientError, ValueError, KeyError) as exc:
            log.info("counting the prompt's tokens at %s failed: %s", url, exc)
    return None


async def _open(
    order: Sequence[str], body: dict[str, Any], *, adapter_path: str
) -> tuple[aiohttp.ClientResponse, str]:
    """Send the request to the replicas of ``order`` in turn, until one starts an answer; the
    response and its URL. ServingUnavailable when none did, ServingError on a refusal (4xx).

    Nothing of an answer has reached the caller yet, so a replica that refuses the connection,
    times out or fails (5xx) is passed over for the next; the ones that did not answer at all
    are remembered as down (``webapp.replicas.down``).
    """
    failure = ServingUnavailable("no model server is configured (VLLM_BASE_URLS)")
    for replica in order:
        url = replica.rstrip("/") + "/chat/completions"
        try:
            response = await _post(url, body)
            if response.status == 404 and adapter_path:
                response.close()
                await adapter_load(base_url=replica, name=body["model"], path=adapter_path)
                response = await _post(url, body)
        except (TimeoutError, aiohttp.ClientError) as exc:
            # Refused or timed out while (re)starting.
            replicas.down.mark(replica)
            failure = ServingUnavailable(f"the model server at {url} is not answering")
            failure.__cause__ = exc
            continue
        except ServingUnavailable as exc:  # the adapter load found it not answering
            replicas.down.mark(replica)
            failure = exc
            continue
        if response.status < 400:
            return response, url
        try:
            error = _serving_error(response.status, await response.read())
        except (TimeoutError, aiohttp.ClientError) as exc:
            error = ServingUnavailable(f"the model server at {url} stopped answering")
            error.__cause__ = exc
        finally:
            response.close()
        if isinstance(error, ServingError):
            raise error
        failure = error
    raise failure


async def _post(
    url: str, body: dict[str, Any], *, timeout: aiohttp.ClientTimeout | None = None
) -> aiohttp.ClientResponse:
    """POST to vLLM, once more if the server dropped the connection before answering.

    A pooled connection the server closes as the request goes out (its keep-alive ran out)
    ends in ``ServerDisconnectedError`` or a reset before any byte of an answer: vLLM never
    started on that request, so it is sent again, on a new connection. A server that refuses
    connections (down or restarting) is not retried here. Both callers are safe to repeat: a
    chat request vLLM never started, and an adapter load (a second load of a name vLLM already
    has answers "already loaded", which counts as loaded).
    """
    options: dict[str, Any] = {"json": body, "headers": auth_headers()}
    if timeout is not None:
        options["timeout"] = timeout
    try:
        return await _session().post(url, **options)
    except aiohttp.ClientConnectorError:
        raise
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        log.info("the model server at %s dropped the connection (%s); sending again", url, exc)
        return await _session().post(url, **options)


def _serving_error(status: int, raw: bytes) -> Exception:
    if status >= 500:
        return ServingUnavailable(f"the model server failed ({status})")
    try:
        error = json.loads(raw).get("error", {})
        message = error.get("message") if isinstance(error, dict) else str(error)
        param = error.get("param") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        message, param = raw.decode("utf-8", "replace")[:500], None
    return ServingError(
        status, message or f"the model server refused the request ({status})", param
    )


@dataclass
class ChoiceResult:
    """One choice of a completion, folded from its stream of deltas."""

    index: int = 0
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    logprob_content: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        elif message["content"] is None:
            message["content"] = ""
        return message


@dataclass
class CompletionAccumulator:
    """Folds streamed chunks into per-choice results, token ids and usage."""

    id: str = ""
    created: int = 0
    prompt_token_ids: list[int] | None = None
    usage: dict[str, Any] | None = None
    choices: dict[int, ChoiceResult] = field(default_factory=dict)

    def add(self, chunk: dict[str, Any]) -> None:
        self.id = self.id or chunk.get("id", "")
        self.created = self.created or int(chunk.get("created") or 0)
        if chunk.get("prompt_token_ids") and self.prompt_token_ids is None:
            self.prompt_token_ids = list(chunk["prompt_token_ids"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for raw in chunk.get("choices") or []:
            choice = self.choices.setdefault(raw["index"], ChoiceResult(index=raw["index"]))
            delta = raw.get("delta") or {}
            choice.content += delta.get("content") or ""
            choice.reasoning += delta.get("reasoning_content") or delta.get("reasoning") or ""
            for call in delta.get("tool_calls") or []:
                _merge_tool_call(choice.tool_calls, call)
            if raw.get("token_ids"):
                choice.token_ids.extend(raw["token_ids"])
            for item in (raw.get("logprobs") or {}).get("content") or []:
                choice.token_logprobs.append(float(item["logprob"]))
                choice.logprob_content.append(item)
            if raw.get("finish_reason"):
                choice.finish_reason = raw["finish_reason"]

    def choice(self, index: int = 0) -> ChoiceResult:
        return self.choices.setdefault(index, ChoiceResult(index=index))


def _merge_tool_call(calls: list[dict[str, Any]], delta: dict[str, Any]) -> None:
    index = delta.get("index", len(calls))
    while len(calls) <= index:
        calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
    call = calls[index]
    if delta.get("id"):
        call["id"] = delta["id"]
    if delta.get("type"):
        call["type"] = delta["type"]
    function = delta.get("function") or {}
    if function.get("name"):
        call["function"]["name"] += function["name"]
    if function.get("arguments"):
        call["function"]["arguments"] += function["arguments"]
