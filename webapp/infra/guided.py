"""Guided decoding for the llama.cpp engine, as vLLM offers it: JSON answers
(``response_format``) and tool calls the model must make (``tool_choice`` "required" or a
named tool).

A request's constraint becomes a GBNF grammar (llama-cpp-python's JSON-schema converter), and
llama.cpp's grammar sampler says at each step which tokens may come next; Parley's own sampler
then draws among those (``webapp.infra.sampling``), so the log-prob reported is still that of
the distribution the token was drawn from. For tool calls the shapes are vLLM's: "required"
asks for a JSON array of ``{"name", "parameters"}`` objects, one of the offered tools each; a
named tool asks for its arguments object.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from webapp.infra.llama_library import library


class GuidedError(ValueError):
    """The request's constraint cannot be turned into a grammar."""


@dataclass(frozen=True)
class Guide:
    grammar: str
    tools: str | None = None  # "required" or "named": the answer is tool calls
    tool_name: str = ""


def guide_for(body: dict[str, Any]) -> Guide | None:
    """The grammar a request's fields ask for; None when it asks for none."""
    from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

    choice = body.get("tool_choice")
    tools = body.get("tools") or []
    if choice == "required" or isinstance(choice, dict):
        if not tools:
            raise GuidedError("tool_choice needs 'tools'.")
        if isinstance(choice, dict):
            name = (choice.get("function") or {}).get("name")
            tool = next((t for t in tools if t["function"]["name"] == name), None)
            if tool is None:
                raise GuidedError(f"tool_choice names '{name}', which is not among the tools.")
            schema = tool["function"].get("parameters") or {"type": "object"}
            return Guide(_grammar(json_schema_to_gbnf, schema), "named", name)
        calls = [
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": [t["function"]["name"]]},
                    "parameters": t["function"].get("parameters") or {"type": "object"},
                },
                "required": ["name", "parameters"],
            }
            for t in tools
        ]
        schema = {"type": "array", "minItems": 1, "items": {"anyOf": calls}}
        return Guide(_grammar(json_schema_to_gbnf, schema), "required")
    structured = dict(body.get("structured_outputs") or {})
    structured.pop("choice", None)  # a choice among strings: Sampling.choices
    if "json" in structured:
        schema = structured.pop("json")
        return Guide(_grammar(json_schema_to_gbnf, schema) if schema else JSON_GBNF)
    if structured:
        raise GuidedError(f"structured_outputs {sorted(structured)} are not supported here.")
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    if kind == "json_object":
        return Guide(JSON_GBNF)
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema") or {}
        return Guide(_grammar(json_schema_to_gbnf, schema))
    if kind not in (None, "text"):
        raise GuidedError(f"response_format type '{kind}' is not supported.")
    return None


def _grammar(convert: Any, schema: dict[str, Any]) -> str:
    try:
        return convert(json.dumps(schema))
    except Exception as exc:  # the converter raises whatever it meets first
        raise GuidedError(f"the JSON schema cannot be used: {exc}") from exc


def tool_calls(guide: Guide, text: str) -> list[dict[str, str]]:
    """(name, arguments JSON) of each call a finished guided answer made; [] when it is not
    valid (cut off by max_tokens)."""
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if guide.tools == "named":
        return [{"name": guide.tool_name, "arguments": json.dumps(value, ensure_ascii=False)}]
    return [
        {"name": call["name"], "arguments": json.dumps(call["parameters"], ensure_ascii=False)}
        for call in value
        if isinstance(call, dict) and "name" in call
    ]


class GrammarMask:
    """llama.cpp's grammar sampler over the whole vocabulary: which tokens may come next."""

    def __init__(self, vocab: Any, grammar: str, vocab_size: int) -> None:
        llama = library()
        self._llama = llama
        self._sampler = llama.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not self._sampler:
            raise GuidedError("llama.cpp refused the grammar")
        self._data = (llama.llama_token_data * vocab_size)()
        view = np.ctypeslib.as_array(self._data)
        view["id"] = np.arange(vocab_size, dtype=np.int32)
        self._view = view
        self._array = llama.llama_token_data_array(self._data, vocab_size, -1, False)

    def allowed(self) -> list[int]:
        """The token ids the grammar lets come next."""
        self._view["logit"] = 0.0
        self._array.selected, self._array.sorted = -1, False
        self._llama.llama_sampler_apply(self._sampler, ctypes.byref(self._array))
        return np.flatnonzero(np.isfinite(self._view["logit"])).tolist()

    def accept(self, token: int) -> None:
        self._llama.llama_sampler_accept(self._sampler, token)

    def free(self) -> None:
        if self._sampler:
            self._llama.llama_sampler_free(self._sampler)
            self._sampler = None
