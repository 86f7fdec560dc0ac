"""Tool calls in Hermes form (``<tool_call>{"name": …, "arguments": …}</tool_call>``) out of a
stream of text, as vLLM's ``hermes`` parser gives them: the text before a call streams as
content, a call becomes one ``tool_calls`` delta when it closes, and text that is not a valid
call stays content.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


class ToolCallStream:
    def __init__(self) -> None:
        self.pending = ""
        self.calls = 0

    def feed(self, text: str, *, final: bool = False) -> tuple[str, list[dict[str, Any]]]:
        """More text in; the content to show now and the calls completed by it."""
        self.pending += text
        content, calls = "", []
        while True:
            start = self.pending.find(OPEN)
            if start < 0:
                keep = 0 if final else partial_suffix(self.pending, OPEN)
                content += self.pending[: len(self.pending) - keep]
                self.pending = self.pending[len(self.pending) - keep :]
                break
            content += self.pending[:start]
            self.pending = self.pending[start:]
            end = self.pending.find(CLOSE)
            if end < 0:
                if final:
                    content += self.pending
                    self.pending = ""
                break
            body = self.pending[len(OPEN) : end]
            self.pending = self.pending[end + len(CLOSE) :]
            call = self._call(body)
            if call is None:
                content += OPEN + body + CLOSE
            else:
                calls.append(call)
        return content, calls

    def _call(self, body: str) -> dict[str, Any] | None:
        try:
            parsed = json.loads(body)
        except ValueError:
            return None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return None
        arguments = parsed.get("arguments", parsed.get("parameters", {}))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        index, self.calls = self.calls, self.calls + 1
        return {
            "index": index,
            "id": f"chatcmpl-tool-{secrets.token_hex(8)}",
            "type": "function",
            "function": {"name": parsed["name"], "arguments": arguments},
        }


def partial_suffix(text: str, marker: str) -> int:
    """The length of the longest end of ``text`` that begins ``marker``.

    >>> partial_suffix("hello <tool", "<tool_call>")
    5
    >>> partial_suffix("hello", "<tool_call>")
    0
    """
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0
