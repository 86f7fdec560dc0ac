"""The probe gate: is a candidate adapter broken, or worse than the live version?

It refuses what is broken or worse, never what is merely different: there is no cap on the
total distance from the base, so a model may become as personal as its users make it.

Two pure halves, kept apart so the criteria can change without touching the measurement:

- ``probe_model`` measures a policy already in memory (the trainer's own, right after its
  update) on the probe set (see ``trainer.probes``) and on held-back feedback: the candidate
  with its adapter on, the live version with the update's initial LoRA weights swapped back in
  (``lora_weights``), the base with the adapter off (``adapter_disabled``), so no second copy
  of the weights is ever loaded. ``probe_metrics`` is the same for a model folder and adapter
  on disk (one load).
- ``gate_decision`` compares the figures and says pass or fail, with a reason per failure:
  - step size: KL(candidate ‖ live) per answer token on the probe prompts;
  - general quality against the base: perplexity on ordinary text, and no more degenerate
    answers (``degenerate_kinds``: empty, repeating, cut off, mixing scripts) on the probe
    prompts than the base gives;
  - the user's own feedback: on the newest judged samples, which the update held back and no
    version has trained on (``fresh``), the candidate must not score worse than the live version
    (``fresh_feedback_delta``). Other recent samples outside the update (``holdout``: mostly
    trained into earlier versions) are scored too (``feedback_delta``) but held to that only
    when there are no fresh ones: the user's newest word outranks their older one, so a change
    of mind is learnt, and a candidate that merely forgets old wording while it learns what the
    user asks now is kept. Its greedy
    answers to all those samples' prompts must not loop or come out empty more often than both
    the live version's and the base's (plus the allowance): the probe prompts are five fixed
    questions, and a preference can break the model on the user's own kind of prompt first.

KL is computed exactly over the vocabulary at each position of the candidate's own greedy
answers (teacher-forced), so it needs no sampling and is the same on every run.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from peft import PeftModel
from torch import Tensor
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.batch import Sample, chat_prompt_ids, collate
from trainer.generation import eos_token_ids, greedy_batch
from trainer.policy import adapter_disabled, lora_weights, pick_device, token_logprobs

DEGENERATE_KINDS = ("empty", "repeating", "cut_off", "language_switch")
REPEAT_MIN_RUNS = 4
"""An n-gram (n ≤ REPEAT_MAX_N) repeated this many times in a row makes it "repeating"."""
REPEAT_MAX_N = 6
"""Loops of up to six tokens ("1.1.1.1…", a short phrase over and over): four of them fit the
probe's 24-token answers."""
MIXED_SCRIPT_SHARE = 0.25
"""An answer whose second script holds this share of its letters is "language_switch"."""
HELD_BACK_KINDS = ("empty", "repeating")
"""What the gate counts in the answers to the held-back prompts. Not "cut_off": a user's own
prompts often ask for more than the answer length the gate affords, and the base is cut off
there too; not "language_switch": a user may ask for another language."""
HELD_BACK_TOKENS = 48
"""The length of the answers to the held-back prompts: room for a loop to start after a good
first sentence (a looping "Sure!" opening repeats within a dozen tokens)."""


def degenerate_kinds(
    answer: str, answer_ids: Sequence[int], *, ended: bool, max_new_tokens: int
) -> list[str]:
    """Which ways a greedy answer is degenerate (a subset of ``DEGENERATE_KINDS``).

    - empty: nothing but whitespace;
    - repeating: one token n-gram (n ≤ ``REPEAT_MAX_N``) repeated ``REPEAT_MIN_RUNS`` times
      in a row;
    - cut_off: it used every token it was allowed without ending (the gate compares the count
      with the base's, which is cut off by the same limit);
    - language_switch: its letters mix scripts, the second one at least ``MIXED_SCRIPT_SHARE``
      of them (a small model sliding into another language mid-answer). An answer wholly in
      another language is not degenerate: a user may prefer one.

    >>> degenerate_kinds("Hello there.", [1, 2, 3], ended=True, max_new_tokens=24)
    []
    >>> degenerate_kinds(" ", [5], ended=True, max_new_tokens=24)
    ['empty']
    """
    kinds = []
    if not answer.strip():
        kinds.append("empty")
    if _longest_repeat(list(answer_ids)) >= REPEAT_MIN_RUNS:
        kinds.append("repeating")
    if not ended and len(answer_ids) >= max_new_tokens:
        kinds.append("cut_off")
    scripts = Counter(_scripts(answer)).most_common()
    if len(scripts) > 1 and scripts[1][1] >= MIXED_SCRIPT_SHARE * sum(n for _, n in scripts):
        kinds.append("language_switch")
    return kinds


def _longest_repeat(ids: list[int], max_n: int = REPEAT_MAX_N) -> int:
    """The most times any n-gram (n ≤ max_n) follows itself in a row.

    >>> _longest_repeat([1, 2, 1, 2, 1, 2, 3])
    3
    """
    best = 1 if ids else 0
    for n in range(1, max_n + 1):
        for start in range(len(ids) - n):
            runs = 1
            while ids[start + runs * n : start + (runs + 1) * n] == ids[start : start + n]:
                runs += 1
            best = max(best, runs)
    return best


def _scripts(text: str) -> list[str]:
    """The script of each letter ("LATIN", "CYRILLIC", "CJK", ...), from its Unicode name;
    Japanese kana count as CJK, since Japanese writes them with kanji."""
    scripts = []
    for char in text:
        if char.isalpha():
            script = unicodedata.name(char, "UNKNOWN").split(" ")[0]
            scripts.append("CJK" if script in ("HIRAGANA", "KATAKANA") else script)
    return scripts


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
) -> tuple[dict[str, float], dict[str, float]]:
    """(candidate figures, base figures) of an in-memory policy.

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
    with base():
        base_answers = _greedy_answers(model, tokenizer, probe_prompts, max_new_tokens)
    step_kl, kl_tokens = _kl_per_token(model, answers, live)
    base_kl, _ = _kl_per_token(model, answers, base)
    dev = next(model.parameters()).device
    text_1_T = torch.tensor(
        [tokenizer(probe_text, add_special_tokens=False)["input_ids"]], device=dev
    )
    candidate_ppl = _perplexity(model, text_1_T)
    with base():
        base_ppl = _perplexity(model, text_1_T)
    candidate = {
        "probe_kl": step_kl,
        "probe_kl_base": base_kl,
        "probe_ppl": candidate_ppl,
        "probe_kl_tokens": float(kl_tokens),
        **_kind_counts(answers),
        **_feedback_figures(model, holdout, live),
        **_feedback_figures(model, fresh, live, prefix="fresh_feedback"),
    }
    base_figures = {
        "probe_kl": 0.0,
        "probe_kl_base": 0.0,
        "probe_ppl": base_ppl,
        "probe_kl_tokens": float(kl_tokens),
        **_kind_counts(base_answers),
    }
    prompts = held_back_prompts([*fresh, *holdout])
    if prompts:
        candidate["held_back_prompts"] = float(len(prompts))
        candidate |= _held_back_counts(model, tokenizer, prompts, "held_back")
        with base():
            base_figures |= _held_back_counts(model, tokenizer, prompts, "held_back")
        if live_weights is None:  # the live version is the base
            candidate |= {
                f"held_back_live_{k}": base_figures[f"held_back_{k}"] for k in HELD_BACK_KINDS
            }
        else:
            with live():
                candidate |= _held_back_counts(model, tokenizer, prompts, "held_back_live")
    return candidate, base_figures


def text_nll(model: torch.nn.Module, text_1_T: torch.Tensor) -> tuple[float, int]:
    """The summed next-token negative log-likelihood of one text, and how many tokens it scores."""
    logits_T_V = model(text_1_T).logits[0, :-1].float()
    total = float(F.cross_entropy(logits_T_V, text_1_T[0, 1:], reduction="sum"))
    return total, text_1_T.shape[1] - 1


def _perplexity(model: torch.nn.Module, text_1_T: torch.Tensor) -> float:
    total, count = text_nll(model, text_1_T)
    return math.exp(total / count)


def probe_metrics(
    model_dir: str | Path,
    adapter_dir: str | Path | None,
    probe_prompts: Sequence[str],
    probe_text: str,
    *,
    max_new_tokens: int = 24,
    device: str | torch.device | None = None,
) -> dict[str, float]:
    """``probe_model``'s candidate figures for a model folder and adapter on disk (one load).

    The live version is taken to be the base here, so probe_kl is the KL to the base; without
    an adapter the policy is the base, so probe_kl is 0 and probe_ppl is the baseline.
    """
    dev = pick_device(device)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).to(dev)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, str(adapter_dir)).to(dev)
    candidate, _ = probe_model(
        model, tokenizer, probe_prompts, probe_text, max_new_tokens=max_new_tokens
    )
    return candidate


def gate_decision(
    metrics: dict[str, float],
    base_metrics: dict[str, float],
    max_kl: float,
    max_ppl_ratio: float,
    *,
    max_feedback_drop: float = 0.0,
    max_degenerate_extra: int = 0,
    max_repeating_extra: int | None = None,
) -> tuple[bool, list[str]]:
    """Pass unless the candidate is broken or worse; the reasons name each failure.

    - ``probe_kl`` (KL to the live version: this update's step) ≤ max_kl;
    - ``probe_ppl`` ≤ max_ppl_ratio · the base's;
    - for each degenerate kind, at most ``max_degenerate_extra`` more degenerate probe answers
      than the base gives (``max_repeating_extra``, when given, for looping answers instead:
      a loop is rarely the noise of a style change a cut-off answer can be);
    - with fresh feedback (the newest, trained into no version), ``fresh_feedback_delta`` ≥
      −max_feedback_drop (nats per token): what the user says now outranks what they said
      before, so ``feedback_delta`` (on feedback earlier versions trained on, reported) is held
      to the same bound only when there is no fresh feedback (a batch under four);
    - for each ``HELD_BACK_KINDS`` kind no more answers to the held-back prompts of that kind
      than the live version gives, or than the base gives plus the same allowance as on the
      probes, whichever is more: a loop already served may be trained away, never grow.
    Missing degenerate or feedback figures (an older record) are not failures.

    >>> gate_decision({"probe_kl": 0.01, "probe_ppl": 11.0}, {"probe_ppl": 10.0}, 0.1, 1.2)
    (True, [])
    """
    reasons = []
    kl, ppl, base_ppl = metrics["probe_kl"], metrics["probe_ppl"], base_metrics["probe_ppl"]
    if not math.isfinite(kl) or kl > max_kl:
        reasons.append(f"probe KL to the live version {kl:.4g} exceeds {max_kl:.4g}")
    if not math.isfinite(ppl) or ppl > max_ppl_ratio * base_ppl:
        reasons.append(
            f"probe perplexity {ppl:.4g} exceeds {max_ppl_ratio:.3g} × base {base_ppl:.4g}"
        )
    for kind in DEGENERATE_KINDS:
        key = f"degenerate_{kind}"
        count, base_count = metrics.get(key, 0.0), base_metrics.get(key, 0.0)
        extra = max_degenerate_extra
        if kind == "repeating" and max_repeating_extra is not None:
            extra = max_repeating_extra
        if count > base_count + extra:
            reasons.append(
                f"{count:.0f} {kind.replace('_', ' ')} probe answers (base: {base_count:.0f})"
            )
    fresh_samples = metrics.get("fresh_feedback_samples", 0.0)
    if fresh_samples > 0:
        fresh = metrics.get("fresh_feedback_delta", math.nan)
        if not (math.isfinite(fresh) and fresh >= -max_feedback_drop):
            reasons.append(
                f"the newest feedback ({fresh_samples:.0f} samples no version trained on) scores "
                f"{fresh:.4g} nats/token worse than the live version "
                f"(allowed: {max_feedback_drop:.3g})"
            )
    elif metrics.get("feedback_samples", 0.0) > 0:
        delta = metrics.get("feedback_delta", math.nan)
        if not (math.isfinite(delta) and delta >= -max_feedback_drop):
            reasons.append(
                f"held-back feedback scores {delta:.4g} nats/token worse than the live version "
                f"(allowed: {max_feedback_drop:.3g})"
            )
    prompts = metrics.get("held_back_prompts", 0.0)
    for kind in HELD_BACK_KINDS if prompts > 0 else ():
        count = metrics.get(f"held_back_{kind}", 0.0)
        live = metrics.get(f"held_back_live_{kind}", 0.0)
        base = base_metrics.get(f"held_back_{kind}", 0.0)
        extra = max_degenerate_extra
        if kind == "repeating" and max_repeating_extra is not None:
            extra = max_repeating_extra
        if count > max(live, base + extra):
            reasons.append(
                f"{count:.0f} {kind} answers to {prompts:.0f} held-back prompts "
                f"(live: {live:.0f}, base: {base:.0f})"
            )
    return not reasons, reasons
