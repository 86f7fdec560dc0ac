"""Training samples as plain dataclasses, and their collation into padded tensors.

The caller (webapp's training workflow) turns database rows into ``Sample``s; nothing here
knows about Django. ``Sample`` is the trainer's view of the same domain noun as the stored
``webapp.learning.models.Sample``: the tokens, reward and hint of one judged answer.

Tokens are the ones serving sampled, never a re-tokenised copy of the text: the only
tokenisation done here is of prompts the caller builds (the hinted teacher prompt).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

HINT_PREFIX = "\n\n[Hint] "


@dataclass(frozen=True)
class Sample:
    """One judged answer as the trainer sees it: token ids, sampler log-probs and signals."""

    prompt_token_ids: list[int]
    """The prompt exactly as serving tokenised it (chat template, generation prompt included)."""

    response_token_ids: list[int]
    """The tokens serving sampled for the answer."""

    sampler_logprobs: list[float]
    """Serving's log-probability of each response token (same length as response_token_ids)."""

    reward: float | None = None
    """The judged reward (+1/−1/0), or None when the turn has no reward (OPD only)."""

    hint: str | None = None
    """The hint text (from a comment or the judge), or None when there is none (RL only)."""

    teacher_prompt_token_ids: list[int] | None = None
    """The prompt with the hint appended to the last user message (see hinted_prompt_ids)."""

    correction_token_ids: list[int] | None = None
    """The answer the user wrote instead, trained with a supervised loss under the same prompt."""

    group_id: str | None = None
    """Siblings regenerated for the same prompt share this id and form one GRPO group."""

    temperature: float = 1.0
    """The temperature serving sampled the response at. vLLM reports log-probs after it
    (``--logprobs-mode processed_logprobs``), so the trainer scores the response with its
    logits divided by the same temperature: behaviour policy and importance weights agree."""

    distils_context: bool = False
    """Context distillation of a person's memories: the response was sampled with them in the
    prompt (``teacher_prompt_token_ids``, as served, ``hint`` their text), and
    ``prompt_token_ids`` is the same turn without them. The student's old log-probs are the
    policy's own on that prompt at the start of the update, so the per-token advantage is
    teacher − student, whatever the algorithm."""

    def __post_init__(self) -> None:
        if not self.prompt_token_ids:
            raise ValueError(
                "a sample needs a prompt: the first token has nothing to be scored from"
            )
        if len(self.sampler_logprobs) != len(self.response_token_ids):
            raise ValueError(
                f"{len(self.sampler_logprobs)} sampler log-probs for "
                f"{len(self.response_token_ids)} response tokens"
            )
        if self.hint is not None and self.teacher_prompt_token_ids is None:
            raise ValueError("a sample with a hint needs teacher_prompt_token_ids")
        if not self.temperature > 0:
            raise ValueError(f"sampling temperature {self.temperature} is not positive")


@dataclass(frozen=True)
class Batch:
    """Prompt + target sequences, right-padded to one length T."""

    input_ids_B_T: Tensor
    attention_mask_B_T: Tensor
    target_mask_B_T: Tensor
    """1 on the target (response or correction) tokens, 0 on prompt and padding."""
    target_logp_B_T: Tensor
    """Given log-probs of the target tokens (the sampler's), 0 elsewhere."""
    temperature_B: Tensor
    """Each row's sampling temperature (1 for rows that were not sampled: corrections)."""

    def to(self, device: torch.device | str) -> Batch:
        return Batch(*(tensor.to(device) for tensor in vars(self).values()))


def collate(
    prompts: list[list[int]],
    targets: list[list[int]],
    *,
    pad_id: int = 0,
    target_logprobs: list[list[float]] | None = None,
    temperatures: list[float] | None = None,
) -> Batch:
    """Concatenate each prompt with its target, right-pad with pad_id, mask the target tokens."""
    lengths = [len(prompt) + len(target) for prompt, target in zip(prompts, targets, strict=True)]
    B, T = len(lengths), max(lengths, default=0)
    input_ids_B_T = torch.full((B, T), pad_id, dtype=torch.long)
    attention_mask_B_T = torch.zeros((B, T), dtype=torch.long)
    target_mask_B_T = torch.zeros((B, T), dtype=torch.float32)
    target_logp_B_T = torch.zeros((B, T), dtype=torch.float32)
    for row, (prompt, target) in enumerate(zip(prompts, targets, strict=True)):
        start, end = len(prompt), len(prompt) + len(target)
        input_ids_B_T[row, :end] = torch.tensor(prompt + target, dtype=torch.long)
        attention_mask_B_T[row, :end] = 1
        target_mask_B_T[row, start:end] = 1.0
        if target_logprobs is not None:
            target_logp_B_T[row, start:end] = torch.tensor(target_logprobs[row])
    temperature_B = torch.tensor(
        temperatures if temperatures is not None else [1.0] * B, dtype=torch.float32
    )
    return Batch(input_ids_B_T, attention_mask_B_T, target_mask_B_T, target_logp_B_T, temperature_B)


def concat_batches(batches: list[Batch], *, pad_id: int = 0) -> Batch:
    """The batches' rows one after another, right-padded to the widest: row i of the second
    batch is row len(first) + i, and its first columns are the columns it had."""
    width = max(batch.input_ids_B_T.shape[1] for batch in batches)

    def padded(tensor: Tensor, value: float) -> Tensor:
        return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]), value=value)

    return Batch(
        torch.cat([padded(b.input_ids_B_T, pad_id) for b in batches]),
        torch.cat([padded(b.attention_mask_B_T, 0) for b in batches]),
        torch.cat([padded(b.target_mask_B_T, 0) for b in batches]),
        torch.cat([padded(b.target_logp_B_T, 0) for b in batches]),
        torch.cat([b.temperature_B for b in batches]),
    )


def micro_batches(
    rows: list[int], lengths: list[int], *, max_tokens: int, max_rows: int
) -> Iterator[list[int]]:
    """Consecutive runs of row indices whose padded size (rows × longest) fits ``max_tokens``.

    ``lengths[i]`` is row ``rows[i]``'s sequence length. Rows sorted by length waste the least
    padding. A row longer than ``max_tokens`` on its own still gets a micro-batch of its own.

    >>> list(micro_batches([0, 1, 2, 3], [100, 100, 300, 900], max_tokens=900, max_rows=8))
    [[0, 1, 2], [3]]
    """
    current: list[int] = []
    longest = 0
    for row, length in zip(rows, lengths, strict=True):
        widest = max(longest, length)
        if current and (len(current) >= max_rows or (len(current) + 1) * widest > max_tokens):
            yield current
            current, widest = [], length
        current.append(row)
        longest = widest
    if current:
        yield current


def move_targets(values_B_S: Tensor, from_mask_B_S: Tensor, to_mask_B_T: Tensor) -> Tensor:
    """Per-token target values from one layout to another with the same targets per row.

    The teacher sees the same response tokens behind a longer (hinted) prompt; this puts its
    log-probs at the positions the student batch uses. Rows must have equal target counts.
    """
    moved_B_T = torch.zeros(to_mask_B_T.shape, dtype=values_B_S.dtype, device=values_B_S.device)
    moved_B_T[to_mask_B_T.bool()] = values_B_S[from_mask_B_S.bool()]
    return moved_B_T


def chat_prompt_text(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> str:
    """The chat template rendered with the generation prompt (and the tools, as vLLM passes
    them to the template)."""
    kwargs = {"tools": tools} if tools else {}
    return str(
        tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **kwargs
        )
    )


def chat_prompt_ids(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> list[int]:
    """The chat template applied with the generation prompt, tokenised as vLLM does it.

    vLLM renders the template to text and tokenises it without adding special tokens again.
    """
    text = chat_prompt_text(tokenizer, messages, tools)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def hinted_messages(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """A copy of the messages with "\\n\\n[Hint] <hint>" appended to the last user message."""
    hinted = copy.deepcopy(messages)
    for message in reversed(hinted):
        if message.get("role") == "user":
            message["content"] = f"{message.get('content') or ''}{HINT_PREFIX}{hint.strip()}"
            return hinted
    raise ValueError("no user message to attach the hint to")


def hinted_prompt_ids(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    hint: str,
    *,
    tools: list[dict[str, Any]] | None = None,
    served_prompt_ids: list[int] | None = None,
) -> list[int]:
    """The OPD teacher's prompt: the student's prompt plus the hint, nothing else.

    The hint goes where the template puts the end of the last user message. With
    ``served_prompt_ids`` (the prompt serving actually tokenised) everything before that point
    is taken from the served prompt itself, so whatever the stored messages lack (a system
    prompt an agent rewrote, a failed answer left out) cannot make the teacher's context
    differ from the student's: the teacher's text is the served text with the hint inserted.
    When the served prompt does not end the way the messages render (another template), the
    rendered hinted messages are the fallback.
    """
    plain = chat_prompt_text(tokenizer, messages, tools)
    hinted = chat_prompt_text(tokenizer, hinted_messages(messages, hint), tools)
    split = _insertion_point(plain, hinted)
    if served_prompt_ids is not None and split is not None:
        served = tokenizer.decode(served_prompt_ids, skip_special_tokens=False)
        tail = plain[split:]
        if served.endswith(tail):
            inserted = hinted[split : split + len(hinted) - len(plain)]
            text = served[: len(served) - len(tail)] + inserted + tail
            return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(hinted, add_special_tokens=False)["input_ids"])


def _insertion_point(plain: str, hinted: str) -> int | None:
    """Where ``hinted`` is ``plain`` with one piece of text inserted; None when it is not.

    >>> _insertion_point("<u>hi</u>", "<u>hi [Hint] x</u>")
    5
    """
    extra = len(hinted) - len(plain)
    if extra <= 0:
        return None
    suffix = 0
    while suffix < len(plain) and plain[-1 - suffix] == hinted[-1 - suffix]:
        suffix += 1
    split = len(plain) - suffix
    if hinted[:split] == plain[:split] and hinted[split + extra :] == plain[split:]:
        return split
    return None


def trainer_sample(
    tokenizer: Any,
    *,
    prompt_messages: list[dict[str, Any]],
    prompt_token_ids: list[int],
    response_token_ids: list[int],
    response_logprobs: list[float],
    reward: float | None,
    hint: str | None,
    correction: str,
    group_id: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    temperature: float = 1.0,
    memory: str = "",
) -> Sample:
    """A judged answer as stored (its hint and correction as text) as the trainer's ``Sample``:
    the correction tokenised and ended with the end-of-sequence token, the hinted teacher
    prompt built on the served prompt (``hinted_prompt_ids``).

    With ``memory`` (the memories the answer was served with, as text) the sample distils
    them: the served prompt is the teacher's, the student's is ``prompt_messages`` rendered
    without them (``Sample.distils_context``)."""
    if memory:
        return Sample(
            prompt_token_ids=chat_prompt_ids(tokenizer, prompt_messages, tools),
            response_token_ids=response_token_ids,
            sampler_logprobs=response_logprobs,
            hint=memory,
            teacher_prompt_token_ids=prompt_token_ids,
            temperature=temperature,
            distils_context=True,
        )
    correction_ids = None
    if correction:
        correction_ids = tokenizer.encode(correction, add_special_tokens=False)
        if tokenizer.eos_token_id is not None:
            correction_ids.append(tokenizer.eos_token_id)
    teacher_ids = None
    if hint:
        teacher_ids = hinted_prompt_ids(
            tokenizer, prompt_messages, hint, tools=tools, served_prompt_ids=prompt_token_ids
        )
    return Sample(
        prompt_token_ids=prompt_token_ids,
        response_token_ids=response_token_ids,
        sampler_logprobs=response_logprobs,
        reward=reward,
        hint=hint,
        teacher_prompt_token_ids=teacher_ids,
        correction_token_ids=correction_ids,
        group_id=group_id,
        temperature=temperature,
    )
