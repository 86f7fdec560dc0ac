"""The policy answering prompts in the benchmark's own process, as serving would, and scored.

``load_serving_model`` is the fp32 base with the live adapter, ``generate`` samples answers with
the raw log-probs vLLM reports, and ``evaluate_splits`` answers the held-out splits greedily
and scores them by each preference, a broken answer counting as a miss. Both can serve the
prompts with a person's memories, in any form Parley serves them (``trainer.memory_prompt``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.preferences import Preference, answer_flaws
from bench.simulated_user import Answer

BROKEN_EXAMPLES = 4  # broken held-out answers quoted per evaluation, so a figure can be checked
MISSED_EXAMPLES = 3  # per preference and split: unbroken answers that miss it, quoted
EXAMPLE_CHARS = 100


def load_serving_model(model_dir: Path, adapter_dir: Path | None, device: str = "cpu") -> Any:
    """The policy as serving runs it: the fp32 base, with the live adapter when there is one."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    if adapter_dir is not None:
        model = PeftModel.from_pretrained(model, str(adapter_dir))
    return model.to(device).eval()


def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    memories: Sequence[str] = (),
    form: str = "appended",
) -> list[Answer]:
    """Answers to single-turn prompts (greedy at temperature 0), with each sampled token's raw
    log-probability, the way vLLM reports it by default.

    With ``memories`` each prompt is served with them in ``form``
    (``trainer.memory_prompt.served_messages``): an answer's ``prompt_token_ids`` are the
    served prompt's, its ``prompt`` the user's text alone."""
    import torch
    import torch.nn.functional as F

    from trainer.batch import chat_prompt_ids
    from trainer.generation import left_pad
    from trainer.memory_prompt import served_messages

    if not prompts:
        return []
    prompt_ids = [
        chat_prompt_ids(
            tokenizer, served_messages([{"role": "user", "content": p}], memories, form=form)
        )
        for p in prompts
    ]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    eos_id = tokenizer.eos_token_id
    input_ids, attention = left_pad(prompt_ids, pad_id)
    width = input_ids.shape[1]
    input_ids, attention = input_ids.to(model.device), attention.to(model.device)
    sampling: dict[str, Any] = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False, "temperature": None, "top_k": None, "top_p": None}
    )
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            max_new_tokens=max_new_tokens,
            pad_token_id=pad_id,
            eos_token_id=eos_id,
            output_logits=True,
            return_dict_in_generate=True,
            use_cache=True,
            **sampling,
        )
    new_B_N = out.sequences[:, width:]
    logp_B_N_V = F.log_softmax(torch.stack(out.logits, dim=1).float(), dim=-1)
    chosen_B_N = logp_B_N_V.gather(-1, new_B_N.unsqueeze(-1)).squeeze(-1)
    answers = []
    for row, prompt in enumerate(prompts):
        ids = new_B_N[row].tolist()
        if eos_id is not None and eos_id in ids:
            ids = ids[: ids.index(eos_id) + 1]  # serving keeps the stop token it sampled
        logprobs = chosen_B_N[row, : len(ids)].tolist()
        text = tokenizer.decode(ids, skip_special_tokens=True)
        answers.append(Answer(prompt, prompt_ids[row], ids, logprobs, text))
    return answers


@dataclass
class Evaluation:
    """One evaluation of the held-out splits.

    ``scores``: {preference: {split: share of greedy answers that meet it}}; ``flawed``:
    {split: share of broken answers}; ``broken_examples``: the start of the first few broken
    answers; ``missed_examples``: {preference: {split: the start of the first few answers that
    are not broken and still miss it}}, so that a score under its target can be read, not
    only counted.
    """

    scores: dict[str, dict[str, float]]
    flawed: dict[str, float]
    broken_examples: list[str] = field(default_factory=list)
    missed_examples: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def evaluate_splits(
    model: Any,
    tokenizer: Any,
    splits: dict[str, list[str]],
    preferences: Sequence[Preference],
    *,
    max_new_tokens: int,
    memories: Sequence[str] = (),
    form: str = "appended",
) -> Evaluation:
    """Every split's prompts answered in one greedy batch (one decoding loop per evaluation),
    then scored per split. An answer meets a preference only when it is not broken
    (``Preference.meets``): a loop that starts with "Sure!" has learnt nothing. ``memories``
    and ``form``: as ``generate`` serves them."""
    result = Evaluation(
        scores={p.name: {} for p in preferences},
        flawed={},
        missed_examples={p.name: {} for p in preferences},
    )
    everything = [prompt for prompts in splits.values() for prompt in prompts]
    answers = generate(
        model,
        tokenizer,
        everything,
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        seed=0,
        memories=memories,
        form=form,
    )
    start = 0
    for split, prompts in splits.items():
        chunk = answers[start : start + len(prompts)]
        start += len(prompts)
        is_broken = [bool(answer_flaws(a.text, a.response_token_ids)) for a in chunk]
        broken = [a for a, flawed in zip(chunk, is_broken, strict=True) if flawed]
        result.flawed[split] = _share(len(broken), len(chunk))
        room = max(0, BROKEN_EXAMPLES - len(result.broken_examples))
        result.broken_examples += [a.text[:EXAMPLE_CHARS] for a in broken][:room]
        for preference in preferences:
            met = [preference.meets(a.text, a.response_token_ids) for a in chunk]
            result.scores[preference.name][split] = _share(sum(met), len(chunk))
            result.missed_examples[preference.name][split] = [
                a.text[:EXAMPLE_CHARS]
                for a, ok, flawed in zip(chunk, met, is_broken, strict=True)
                if not ok and not flawed
            ][:MISSED_EXAMPLES]
    return result


def _share(count: int, total: int) -> float:
    return count / total if total else float("nan")
