"""One request's choices as OpenAI deltas: what the engine's tokens become for the client.

Each choice's tokens arrive from the engine thread; their text is shown as it completes (held
back while a character is cut in half or a stop string may be starting), Hermes tool calls are
taken out of it when the request offers tools, and each token keeps its id and log-prob.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from webapp.infra.guided import Guide, tool_calls
from webapp.infra.hermes_tools import ToolCallStream, partial_suffix
from webapp.infra.llamacpp_engine import Request
from webapp.infra.sampling import Token

if TYPE_CHECKING:
    from webapp.infra.llamacpp_server import Server


class EngineFailed(Exception):
    """The engine dropped a request with an error (its message)."""


class Choice:
    """One choice's tokens, arriving from the engine thread, as deltas for the client: text
    (held back while a character is cut in half or a stop string may be starting), Hermes tool
    calls when the request offers tools, each token's id and log-prob."""

    def __init__(self, server: Server, index: int, body: dict[str, Any]) -> None:
        self.server = server
        self.index = index
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[Token | None, str | None]] = asyncio.Queue()
        self.ids: list[int] = []
        self.decoded = ""
        self.held = ""
        self.text = ""
        self.tool_calls: list[dict[str, Any]] = []
        self.logprob_items: list[dict[str, Any]] = []
        self.finish: str | None = None
        stop = body.get("stop") or []
        self.stops = [stop] if isinstance(stop, str) else [s for s in stop if s]
        choice = body.get("tool_choice")
        offered = body.get("tools") and choice != "none"
        self.tools = ToolCallStream() if offered else None
        # A guided tool call: the whole answer is the calls' JSON, shown as tool_calls at the end.
        self.forced: Guide | None = None
        if offered and choice == "required":
            self.forced = Guide("", "required")
        elif offered and isinstance(choice, dict):
            self.forced = Guide("", "named", (choice.get("function") or {}).get("name", ""))
        self.request: Request

    def emit(self, token: Token | None, reason: str | None) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (token, reason))

    def piece(self, token_id: int) -> str:
        return self.server.tokenizer.decode([token_id])

    def advance(self, token: Token) -> dict[str, Any]:
        self.ids.append(token.id)
        decoded = self.server.tokenizer.decode(self.ids, skip_special_tokens=True)
        if not decoded.endswith("\ufffd"):
            self.held += decoded[len(self.decoded) :]
            self.decoded = decoded
        eos = token.id in self.server.engine.eos_ids and not self.request.sampling.ignore_eos
        piece = self.piece(token.id)
        item = {
            "token": "" if eos else piece,
            "logprob": token.logprob,
            "bytes": list(piece.encode()),
            "top_logprobs": [
                {"token": self.piece(i), "logprob": lp, "bytes": list(self.piece(i).encode())}
                for i, lp in token.top
            ],
        }
        self.logprob_items.append(item)
        return {**self.release(final=False), "token_id": token.id, "logprob": item}

    def release(self, *, final: bool) -> dict[str, Any]:
        """The text that can be shown now, and the tool calls it completes."""
        if self.forced is not None:
            return self._forced(final=final)
        out, keep = self.held, 0
        for stop in self.stops:
            at = out.find(stop)
            if at >= 0:
                out, final, self.finish = out[:at], True, "stop"
        if not final and self.stops:
            keep = max(partial_suffix(out, stop) for stop in self.stops)
        out, self.held = out[: len(out) - keep], out[len(out) - keep :] if keep else ""
        calls: list[dict[str, Any]] = []
        if self.tools is not None:
            out, calls = self.tools.feed(out, final=final)
            self.tool_calls += calls
        self.text += out
        delta: dict[str, Any] = {"content": out}
        if calls:
            delta["tool_calls"] = calls
        return delta

    def _forced(self, *, final: bool) -> dict[str, Any]:
        if not final:
            return {"content": ""}
        assert self.forced is not None
        made = tool_calls(self.forced, self.held)
        if not made:  # cut off before the JSON closed: what was written stays content
            self.text, self.held = self.held, ""
            return {"content": self.text}
        self.held = ""
        calls = [
            {
                "index": index,
                "id": f"chatcmpl-tool-{secrets.token_hex(8)}",
                "type": "function",
                "function": call,
            }
            for index, call in enumerate(made)
        ]
        self.tool_calls += calls
        return {"content": "", "tool_calls": calls}

    def finished(self, reason: str) -> dict[str, Any]:
        if self.ids and self.finish is None:  # a character cut in half at the very end
            decoded = self.server.tokenizer.decode(self.ids, skip_special_tokens=True)
            self.held += decoded[len(self.decoded) :]
            self.decoded = decoded
        delta = self.release(final=True)
        self.finish = "tool_calls" if self.tool_calls and reason == "stop" else reason
        return {**delta, "finish": self.finish}

    def chunk(self, delta: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        shown = {key: delta[key] for key in ("content", "tool_calls") if delta.get(key)}
        entry: dict[str, Any] = {
            "index": self.index,
            "delta": shown,
            "logprobs": {"content": [delta["logprob"]]}
            if body.get("logprobs") and "logprob" in delta
            else None,
            "finish_reason": delta.get("finish"),
        }
        if body.get("return_token_ids") and "token_id" in delta:
            entry["token_ids"] = [delta["token_id"]]
        return entry


async def merged(streams: list[Choice]) -> AsyncIterator[tuple[Choice, dict[str, Any]]]:
    """Each choice's deltas as they come, until every choice has finished."""
    waiting = {asyncio.ensure_future(c.queue.get()): c for c in streams}
    try:
        while waiting:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                choice = waiting.pop(future)
                token, reason = future.result()
                if token is not None:
                    delta = choice.advance(token)
                    if choice.finish == "stop":  # a stop string: the rest is not wanted
                        choice.request.cancel()
                        yield choice, _joined(delta, choice.finished("stop"))
                        continue
                    yield choice, delta
                    waiting[asyncio.ensure_future(choice.queue.get())] = choice
                elif reason in ("stop", "length", "abort"):
                    yield choice, choice.finished(reason)
                else:
                    raise EngineFailed(str(reason))
    finally:
        for future in waiting:
            future.cancel()


def _joined(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    """Two deltas of one step as one: the text and tool calls of both, the rest of the last."""
    joined = {**first, **then, "content": first.get("content", "") + then.get("content", "")}
    calls = (first.get("tool_calls") or []) + (then.get("tool_calls") or [])
    if calls:
        joined["tool_calls"] = calls
    return joined


def message(choice: Choice) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": choice.text or None}
    if choice.tool_calls:
        message["tool_calls"] = [
            {key: value for key, value in call.items() if key != "index"}
            for call in choice.tool_calls
        ]
    elif message["content"] is None:
        message["content"] = ""
    return message


def usage(prompt: list[int], streams: list[Choice]) -> dict[str, int]:
    completion = sum(len(c.ids) for c in streams)
    return {
        "prompt_tokens": len(prompt),
        "completion_tokens": completion,
        "total_tokens": len(prompt) + completion,
    }
