"""Drawing the next token from a model's logits, in numpy, as vLLM samples.

The log-prob reported for a token is its log-probability under the distribution it was
drawn from (after the penalties, temperature, min-p, top-k and top-p): vLLM's
``processed_logprobs``, the behaviour policy the trainer's importance weights divide by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Sampling:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    ignore_eos: bool = False
    top_logprobs: int = 0
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    choices: list[list[int]] | None = None
    grammar: str | None = None  # GBNF the answer must follow (webapp.infra.guided)
    """Guided choice (vLLM's ``structured_outputs.choice``): the answer is one of these token
    sequences; each step may take only a token that keeps it on one of them."""

    def allowed(self, output: list[int], eos_ids: set[int]) -> list[int] | None:
        """The tokens the next step may take under ``choices`` (None: any)."""
        if self.choices is None:
            return None
        step = len(output)
        allowed = {c[step] for c in self.choices if len(c) > step and c[:step] == output}
        if any(c == output for c in self.choices):
            allowed |= eos_ids
        return sorted(allowed) or sorted(eos_ids)

    def penalised(self) -> bool:
        return bool(
            self.presence_penalty or self.frequency_penalty or self.repetition_penalty != 1.0
        )


@dataclass
class Token:
    id: int
    logprob: float
    top: list[tuple[int, float]]


def sample(
    logits: np.ndarray,
    sampling: Sampling,
    rng: np.random.Generator,
    prompt: list[int] = (),  # type: ignore[assignment]
    output: list[int] = (),  # type: ignore[assignment]
    allowed: list[int] | None = None,
) -> Token:
    """Draw one token; its log-prob under the distribution it was drawn from.

    In vLLM's order: logit bias and penalties (repetition over the prompt and the answer,
    presence and frequency over the answer), then temperature, min-p, top-k and top-p.
    Greedy (temperature 0) takes the most likely token and reports the log-softmax unscaled.
    """
    logits = logits.astype(np.float64)
    for token_id, bias in sampling.logit_bias.items():
        if 0 <= token_id < logits.size:
            logits[token_id] += bias
    if sampling.penalised():
        _penalise(logits, sampling, prompt, output)
    if allowed is not None:
        mask = np.full(logits.size, -np.inf)
        mask[allowed] = 0.0
        logits += mask
    greedy = sampling.temperature <= 0
    scaled = logits / (1.0 if greedy else sampling.temperature)
    if not greedy and sampling.min_p > 0:
        scaled[scaled < scaled.max() + np.log(sampling.min_p)] = -np.inf
    if not greedy and 0 < sampling.top_k < scaled.size:
        cut = np.partition(scaled, -sampling.top_k)[-sampling.top_k]
        scaled[scaled < cut] = -np.inf
    if not greedy and sampling.top_p < 1.0:
        order = np.argsort(-scaled)
        probs = np.exp(scaled[order] - scaled[order[0]])
        cumulative = np.cumsum(probs / probs.sum())
        keep = int(np.searchsorted(cumulative, sampling.top_p)) + 1
        scaled[order[keep:]] = -np.inf
    top = scaled.max()
    logprobs = scaled - top - np.log(np.exp(scaled - top).sum())
    if greedy:
        chosen = int(np.argmax(logprobs))
    else:
        cumulative = np.cumsum(np.exp(logprobs))
        chosen = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
        chosen = min(chosen, logprobs.size - 1)
    alternatives: list[tuple[int, float]] = []
    if sampling.top_logprobs:
        best = np.argpartition(-logprobs, sampling.top_logprobs)[: sampling.top_logprobs]
        best = best[np.argsort(-logprobs[best])]
        alternatives = [(int(i), float(logprobs[i])) for i in best]
    return Token(chosen, float(logprobs[chosen]), alternatives)


def _penalise(logits: np.ndarray, sampling: Sampling, prompt: list[int], output: list[int]) -> None:
    if sampling.repetition_penalty != 1.0:
        seen = np.unique(np.asarray([*prompt, *output], dtype=np.int64))
        values = logits[seen]
        logits[seen] = np.where(
            values > 0, values / sampling.repetition_penalty, values * sampling.repetition_penalty
        )
    if output and (sampling.presence_penalty or sampling.frequency_penalty):
        counts = np.bincount(np.asarray(output, dtype=np.int64), minlength=logits.size)
        logits -= sampling.frequency_penalty * counts + sampling.presence_penalty * (counts > 0)
