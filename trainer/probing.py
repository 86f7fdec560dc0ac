"""Measuring a candidate for the probe gate, on the policy already in memory.

``probe_model`` measures the trainer's own model right after its update, on the probe set
(``trainer.probes``) and on held-back feedback: the candidate with its adapter on, the live
version with the update's initial LoRA weights swapped back in (``lora_weights``), the base
with the adapter off (``adapter_disabled``), so no second copy of the weights is ever loaded.
``trainer.gate`` decides on the figures.

KL is computed exactly over the vocabulary at each position of the candidate's own greedy
answers (teacher-forced), so it needs no sampling and is the same on every run.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer.batch import Sample, chat_prompt_ids, collate
from trainer.degenerate import DEGENERATE_KINDS, degenerate_kinds
from trainer.gate import HELD_BACK_KINDS
from trainer.generation import eos_token_ids, greedy_batch
from trainer.policy import adapter_disabled, lora_weights, token_logprobs

HELD_BACK_TOKENS = 48
"""The length of the answers to the held-back prompts: room for a loop to start after a good
first sentence (a looping "Sure!" opening repeats within a dozen tokens)."""


def feedback_target(sample: Sample) -> tuple[list[int], float] | None:
    """What a held-back sample says the model should do: (target tokens, sign), or None.

    A correction is the answer wanted (+1); a liked answer should become more likely (+1), a
    disliked one less likely (−1). A sample with no sign (a hint alone, reward 0) says nothing.
    """
    if sample.correction_token_ids:
        return list(sample.correction_token_ids), 1.0
    if sample.reward and sample.response_token_ids:
        return list(sample.response_token_ids), 1.0 if sample.reward > 0 else -1.0
    return None


def _mean_logprob(model: torch.nn.Module, prompt: list[int], target: list[int]) -> float:
    batch = collate([prompt], [target]).to(next(model.parameters()).device)
    logp_1_T = token_logprobs(
        model, batch.input_ids_B_T, batch.attention_mask_B_T, batch.target_mask_B_T
    )
    return float(logp_1_T.sum()) / len(target)


def _feedback_figures(
    model: torch.nn.Module,
    holdout: Sequence[Sample],
    live: Callable[[], AbstractContextManager[Any]],
    prefix: str = "feedback",
) -> dict[str, float]:
    """Mean over signed held-back samples of sign × (candidate − live) mean log-prob per token
    (``{prefix}_delta``, over ``{prefix}_samples``); reported apart too for the targets to make
    likelier (liked and corrected answers, ``{prefix}_delta_wanted``) and the disliked answers
    to make less likely (``{prefix}_delta_disliked``), so a refusal says which side fell."""
    deltas: dict[float, list[float]] = {1.0: [], -1.0: []}
    for sample in holdout:
        target = feedback_target(sample)
        if target is None:
            continue
        ids, sign = target
        candidate = _mean_logprob(model, sample.prompt_token_ids, ids)
        with live():
            before = _mean_logprob(model, sample.prompt_token_ids, ids)
        deltas[sign].append(sign * (candidate - before))
    every = deltas[1.0] + deltas[-1.0]
    figures = {
        f"{prefix}_delta": sum(every) / len(every) if every else 0.0,
        f"{prefix}_samples": float(len(every)),
    }
    for name, sign in (("wanted", 1.0), ("disliked", -1.0)):
        if deltas[sign]:
            figures[f"{prefix}_delta_{name}"] = sum(deltas[sign]) / len(deltas[sign])
    return figures


def _greedy_answers(
    model: torch.nn.Module, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int
) -> list[tuple[Tensor, int, list[str]]]:
    """(prompt + answer ids (1, T), prompt length, degenerate kinds) per probe prompt, all
    prompts answered in one batch (``trainer.generation.greedy_batch``)."""
    prompt_ids = [chat_prompt_ids(tokenizer, [{"role": "user", "content": p}]) for p in prompts]
    return _greedy_answers_to_ids(model, tokenizer, prompt_ids, max_new_tokens)


def _greedy_answers_to_ids(
    model: torch.nn.Module,
    tokenizer: Any,
    prompt_ids: Sequence[list[int]],
    max_new_tokens: int,
) -> list[tuple[Tensor, int, list[str]]]:
    """``_greedy_answers`` for prompts already rendered to token ids."""
    dev = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    stops = eos_token_ids(model) | ({tokenizer.eos_token_id} - {None})
    replies = greedy_batch(
        model, prompt_ids, max_new_tokens=max_new_tokens, pad_id=pad_id, stop_ids=stops
    )
    answers = []
    for ids, (generated, ended) in zip(prompt_ids, replies, strict=True):
        answer_ids = generated[:-1] if ended else generated  # the stop token is no text
        text = tokenizer.decode(answer_ids, skip_special_tokens=True)
        kinds = degenerate_kinds(text, answer_ids, ended=ended, max_new_tokens=max_new_tokens)
        answers.append((torch.tensor([list(ids) + generated], device=dev), len(ids), kinds))
    return answers


def held_back_prompts(holdout: Sequence[Sample]) -> list[list[int]]:
    """The distinct prompts of the held-back samples, in their order.

    >>> held_back_prompts([Sample([1, 2], [3], [-1.0]), Sample([1, 2], [4], [-1.0])])
    [[1, 2]]
    """
    seen: dict[tuple[int, ...], None] = {}
    for sample in holdout:
        seen.setdefault(tuple(sample.prompt_token_ids), None)
    return [list(ids) for ids in seen]


def _held_back_counts(
    model: torch.nn.Module, tokenizer: Any, prompt_ids: Sequence[list[int]], prefix: str
) -> dict[str, float]:
    """``{prefix}_<kind>``: how many greedy answers to the held-back prompts are of each
    ``HELD_BACK_KINDS`` kind."""
    answers = _greedy_answers_to_ids(model, tokenizer, prompt_ids, HELD_BACK_TOKENS)
    return _kind_counts(answers, HELD_BACK_KINDS, prefix)


def _kind_counts(
    answers: list[tuple[Tensor, int, list[str]]],
    kinds: Sequence[str] = DEGENERATE_KINDS,
    prefix: str = "degenerate",
) -> dict[str, float]:
    """``{prefix}_<kind>``: how many of the answers are degenerate in each of ``kinds``."""
    counts = Counter(kind for _, _, found in answers for kind in found)
    return {f"{prefix}_{kind}": float(counts[kind]) for kind in kinds}


def _kl_per_token(
    model: torch.nn.Module,
    answers: list[tuple[Tensor, int, list[str]]],
    reference: Callable[[], AbstractContextManager[Any]],
) -> tuple[float, int]:
    """Mean KL(model ‖ reference) per answer token on the model's own greedy answers."""
    kl_sum, kl_tokens = 0.0, 0
    for sequence_1_T, prompt_length, _ in answers:
        if sequence_1_T.shape[1] == prompt_length:
            continue
        positions = slice(prompt_length - 1, sequence_1_T.shape[1] - 1)
        policy_logp = F.log_softmax(model(sequence_1_T).logits[0, positions].float(), -1)
        with reference():
            ref_logp = F.log_softmax(model(sequence_1_T).logits[0, positions].float(), -1)
        kl_N = (policy_logp.exp() * (policy_logp - ref_logp)).sum(-1)
        kl_sum += float(kl_N.sum())
        kl_tokens += kl_N.shape[0]
    return kl_sum / max(kl_tokens, 1), kl_tokens


@torch.no_grad()
def probe_model(
    model: torch.nn.Module,
    tokenizer: Any,
    probe_prompts: Sequence[str],
    probe_text: str,
    *,
    max_new_tokens: int = 24,
    live_weights: dict[str, Tensor] | None = None,
    holdout: Sequence[Sample] = (),
    fresh: Sequence[Sample] = (),
    base_probe: dict[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """(candidate figures, base figures) of an in-memory policy.

    Only what the gate's decision needs is measured: ``base_probe``, the base's probe figures
    when already measured (its greedy answers to the fixed probe prompts and its perplexity
    depend on nothing else), is taken as it is. The gate refuses on the held-back prompts only
    where ``count > max(live, base + extra)``: so the live version answers them only when the
    candidate gave an empty or looping answer (``held_back_live_*`` is absent otherwise), and
    the base only when the candidate gave more of a kind than the live version.

    ``live_weights``: the LoRA weights of the live version (``lora_snapshot`` before the
    update); None means the live version is the base (the first update). ``holdout``: recent
    judged samples outside this update (trained into earlier versions, or ready beyond its
    batch); ``fresh``: the newest judged samples, which the update held back and no version has
    trained on.

    Candidate: {"probe_kl": KL(candidate ‖ live) per answer token, "probe_kl_base": KL to the
    base (reported, never gated), "probe_ppl", "probe_kl_tokens", "degenerate_<kind>" counts,
    "feedback_delta", "feedback_samples", "fresh_feedback_delta", "fresh_feedback_samples",
    and with held-back samples of either kind "held_back_prompts" and the
    counts "held_back_<kind>" and "held_back_live_<kind>" (``HELD_BACK_KINDS``) of the
    candidate's and the live version's answers to its prompts}; base: its perplexity, degenerate
    counts and "held_back_<kind>". The model is left in eval mode; a caller that trains it again
    calls ``model.train()``.
    """
    model.eval()

    def base() -> AbstractContextManager[Any]:
        return adapter_disabled(model)

    def live() -> AbstractContextManager[Any]:
        return lora_weights(model, live_weights) if live_weights is not None else base()

    answers = _greedy_answers(model, tokenizer, probe_prompts, max_new_tokens)
    step_kl, kl_tokens = _kl_per_token(model, answers, live)
    base_kl, _ = _kl_per_token(model, answers, base)
    dev = next(model.parameters()).device
    text_1_T = torch.tensor(
        [tokenizer(probe_text, add_special_tokens=False)["input_ids"]], device=dev
    )
    candidate_ppl = _perplexity(model, text_1_T)
    if base_probe is not None:
        base_figures = {k: v for k, v in base_probe.items() if not k.startswith("held_back")}
    else:
        with base():
            base_answers = _greedy_answers(model, tokenizer, probe_prompts, max_new_tokens)
            base_figures = {
                "probe_kl": 0.0,
                "probe_kl_base": 0.0,
                "probe_ppl": _perplexity(model, text_1_T),
                "probe_kl_tokens": float(kl_tokens),
                **_kind_counts(base_answers),
            }
    candidate = {
        "probe_kl": step_kl,
        "probe_kl_base": base_kl,
        "probe_ppl": candidate_ppl,
        "probe_kl_tokens": float(kl_tokens),
        **_kind_counts(answers),
        **_feedback_figures(model, holdout, live),
        **_feedback_figures(model, fresh, live, prefix="fresh_feedback"),
    }
    prompts = held_back_prompts([*fresh, *holdout])
    if prompts:
        candidate["held_back_prompts"] = float(len(prompts))
        candidate |= _held_back_counts(model, tokenizer, prompts, "held_back")
    if prompts and any(candidate[f"held_back_{k}"] for k in HELD_BACK_KINDS):
        # Something the gate could refuse: the live version's answers (and the base's) decide.
        if live_weights is None:  # the live version is the base
            with base():
                base_figures |= _held_back_counts(model, tokenizer, prompts, "held_back")
            candidate |= {
                f"held_back_live_{k}": base_figures[f"held_back_{k}"] for k in HELD_BACK_KINDS
            }
        else:
            with live():
                candidate |= _held_back_counts(model, tokenizer, prompts, "held_back_live")
            if any(
                candidate[f"held_back_{k}"] > candidate[f"held_back_live_{k}"]
                for k in HELD_BACK_KINDS
            ):
                with base():
                    base_figures |= _held_back_counts(model, tokenizer, prompts, "held_back")
    return candidate, base_figures


def text_nll(model: torch.nn.Module, text_1_T: torch.Tensor) -> tuple[float, int]:
    """The summed next-token negative log-likelihood of one text, and how many tokens it scores."""
    logits_T_V = model(text_1_T).logits[0, :-1].float()
    total = float(F.cross_entropy(logits_T_V, text_1_T[0, 1:], reduction="sum"))
    return total, text_1_T.shape[1] - 1


def _perplexity(model: torch.nn.Module, text_1_T: torch.Tensor) -> float:
    total, count = text_nll(model, text_1_T)
    return math.exp(total / count)
