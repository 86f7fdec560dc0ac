"""Requests as the engine takes them: prompts rendered by the model's own tokenizer and chat
template (as vLLM renders them, so the token ids are the trainer's), and sampling settings
from the request's fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from webapp.infra.guided import GuidedError, guide_for
from webapp.infra.sampling import Sampling

GUIDED = ("guided_json", "guided_regex", "guided_grammar")


class Refused(Exception):
    """A request answered with an OpenAI error: ``status``, the message, the error's type."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def prompt_ids(tokenizer: Any, body: dict[str, Any]) -> list[int]:
    """The prompt's token ids, rendered by the model's own chat template (or a raw prompt)."""
    if "prompt" in body and "messages" not in body:
        return list(tokenizer.encode(str(body["prompt"]), add_special_tokens=True))
    messages = [_plain(message) for message in body.get("messages") or []]
    if not messages:
        raise Refused(400, "'messages' must be a non-empty list.")
    try:
        text = tokenizer.apply_chat_template(
            messages,
            tools=body.get("tools") or None,
            add_generation_prompt=body.get("add_generation_prompt", True),
            tokenize=False,
            **(body.get("chat_template_kwargs") or {}),
        )
    except Exception as exc:
        raise Refused(400, f"the chat template could not render these messages: {exc}") from exc
    return list(tokenizer.encode(text, add_special_tokens=False))


def sampling(tokenizer: Any, body: dict[str, Any], *, window: int, prompt: int) -> Sampling:
    """What to sample with, from the request's fields; a 400 for what cannot be done here."""
    choices = (body.get("structured_outputs") or {}).get("choice") or body.get("guided_choice")
    for name in GUIDED:
        if body.get(name):
            raise Refused(400, f"'{name}' is not supported by this engine.")
    try:
        guide = guide_for(body)
    except GuidedError as exc:
        raise Refused(400, str(exc)) from exc
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if prompt >= window or (limit and prompt + int(limit) > window):
        raise Refused(
            400,
            f"This model's maximum context length is {window} tokens. However, your prompt "
            f"contains {prompt} input tokens"
            + (f" and {int(limit)} output tokens were asked for." if limit else "."),
        )
    max_tokens = int(limit) if limit else window - prompt
    if max_tokens < 1:
        raise Refused(400, "'max_tokens' must be at least 1.")
    top_logprobs = int(body.get("top_logprobs") or 0) if body.get("logprobs") else 0
    return Sampling(
        max_tokens=max_tokens,
        temperature=1.0 if body.get("temperature") is None else float(body["temperature"]),
        top_p=float(body.get("top_p") or 1.0),
        top_k=max(int(body.get("top_k") or 0), 0),
        min_p=float(body.get("min_p") or 0.0),
        seed=body.get("seed"),
        ignore_eos=bool(body.get("ignore_eos")),
        top_logprobs=top_logprobs,
        presence_penalty=float(body.get("presence_penalty") or 0.0),
        frequency_penalty=float(body.get("frequency_penalty") or 0.0),
        repetition_penalty=float(body.get("repetition_penalty") or 1.0),
        logit_bias={int(k): float(v) for k, v in (body.get("logit_bias") or {}).items()},
        grammar=guide.grammar if guide else None,
        choices=[tokenizer.encode(str(c), add_special_tokens=False) for c in choices]
        if choices
        else None,
    )


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A message with list content (OpenAI's content parts) joined into text, as vLLM does."""
    content = message.get("content")
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return {**message, "content": "\n".join(parts)}
    return message


def load_tokenizer(model_dir: str | Path) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.model_config = json.loads((Path(model_dir) / "config.json").read_text())
    return tokenizer


def eos_ids(model_dir: str | Path, tokenizer: Any) -> set[int]:
    """The end-of-answer tokens: the generation config's, and the tokenizer's own."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    config = Path(model_dir) / "generation_config.json"
    if config.exists():
        value = json.loads(config.read_text()).get("eos_token_id")
        ids.update(value if isinstance(value, list) else [value] if value is not None else [])
    return ids
