"""It learns: rewarding answers that open with "Sure!" raises that opening's log-probability.

Measured with teacher-forced log-probs on the real base model, not by sampling, so the result
does not depend on luck. Eight samples, two updates of two steps each (the second continues the
first adapter, as the live loop does); about 30 s on two CPU cores.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer

from trainer.batch import Sample, chat_prompt_ids, collate, hinted_prompt_ids
from trainer.config import UpdateConfig
from trainer.policy import load_policy, token_logprobs
from trainer.update import run_update

HINT = "Start your answer with 'Sure!'"
TRAIN = [
    (
        "Can you tell me a fun fact about cats?",
        "Cats sleep for around thirteen to sixteen hours a day, most of their lives.",
    ),
    (
        "Give me a name for a pet goldfish.",
        "How about Bubbles? It is a cheerful name that suits a small orange fish.",
    ),
    (
        "What should I cook for dinner tonight?",
        "A simple pasta with tomatoes, garlic and basil is quick and tasty.",
    ),
    (
        "Suggest a good book to read.",
        "You could try a classic adventure story, such as Treasure Island.",
    ),
    (
        "How can I stay focused while studying?",
        "Put your phone away, work in short blocks and take regular breaks.",
    ),
    (
        "Recommend a hobby for the weekend.",
        "Hiking is a great choice: it is cheap, healthy and gets you outside.",
    ),
    (
        "What is a good way to start the morning?",
        "Drink a glass of water, stretch for a few minutes and eat a light breakfast.",
    ),
    (
        "Tell me something about the moon.",
        "The moon is slowly moving away from the Earth, a few centimetres every year.",
    ),
]
HELD_OUT = [
    "Can you help me plan a picnic?",
    "What is a nice gift for a friend?",
    "Write a short greeting for my neighbour.",
]


def _opening_logp(model: torch.nn.Module, tokenizer, prompts: list[str], hint: str | None = None):
    """Mean log p("Sure!" as the first tokens of the answer), teacher-forced, over the prompts."""
    sure = tokenizer("Sure!", add_special_tokens=False)["input_ids"]
    prompt_ids = [
        hinted_prompt_ids(tokenizer, [{"role": "user", "content": p}], hint)
        if hint
        else chat_prompt_ids(tokenizer, [{"role": "user", "content": p}])
        for p in prompts
    ]
    batch = collate(prompt_ids, [sure] * len(prompts))
    with torch.no_grad():
        logp_B_T = token_logprobs(
            model, batch.input_ids_B_T, batch.attention_mask_B_T, batch.target_mask_B_T
        )
    return float(logp_B_T.sum()) / len(prompts)


def _samples(model: torch.nn.Module, tokenizer) -> list[Sample]:
    """Half the answers open with "Sure!" (+1); the rest don't (−1) and carry the hint.

    The sampler's log-probs are the base model's own plus N(0, 0.02²) noise, standing in for
    vLLM's bf16 numbers.
    """
    rows = []
    for index, (question, answer) in enumerate(TRAIN):
        messages = [{"role": "user", "content": question}]
        text = f"Sure! {answer}" if index % 2 == 0 else answer
        response = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((messages, chat_prompt_ids(tokenizer, messages), response, index % 2 == 0))
    batch = collate([r[1] for r in rows], [r[2] for r in rows])
    with torch.no_grad():
        logp_B_T = token_logprobs(
            model, batch.input_ids_B_T, batch.attention_mask_B_T, batch.target_mask_B_T
        )
    generator = torch.Generator().manual_seed(0)
    samples = []
    for row, (messages, prompt, response, opens_with_sure) in enumerate(rows):
        start = len(prompt)
        exact = logp_B_T[row, start : start + len(response)]
        noisy = exact + 0.02 * torch.randn(len(response), generator=generator)
        samples.append(
            Sample(
                prompt_token_ids=prompt,
                response_token_ids=response,
                sampler_logprobs=noisy.tolist(),
                reward=1.0 if opens_with_sure else -1.0,
                hint=None if opens_with_sure else HINT,
                teacher_prompt_token_ids=None
                if opens_with_sure
                else hinted_prompt_ids(tokenizer, messages, HINT),
            )
        )
    return samples


def test_rewarding_an_opening_raises_its_logprob_under_the_new_adapter(
    prepared_model: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(prepared_model)
    config = UpdateConfig(algorithm="combined")
    base = load_policy(prepared_model, config)  # a fresh adapter is the base model exactly
    prompts = [question for question, _ in TRAIN]
    before = _opening_logp(base, tokenizer, prompts)
    before_held_out = _opening_logp(base, tokenizer, HELD_OUT)
    with_hint = _opening_logp(base, tokenizer, prompts, hint=HINT)
    samples = _samples(base, tokenizer)
    del base

    first = list(
        run_update(
            config,
            samples,
            base_model_dir=prepared_model,
            init_adapter_dir=None,
            out_adapter_dir=tmp_path / "v1",
        )
    )
    second = list(
        run_update(
            config,
            samples,
            base_model_dir=prepared_model,
            init_adapter_dir=tmp_path / "v1",
            out_adapter_dir=tmp_path / "v2",
        )
    )
    trained = load_policy(prepared_model, config, init_adapter_dir=tmp_path / "v2")
    after = _opening_logp(trained, tokenizer, prompts)
    after_held_out = _opening_logp(trained, tokenizer, HELD_OUT)
    print(
        f'"Sure!" opening log-prob: base {before:.2f} (with hint {with_hint:.2f}) → '
        f"after two updates {after:.2f}; held-out prompts {before_held_out:.2f} → "
        f"{after_held_out:.2f}; update seconds {first[-1]['seconds']:.1f}, "
        f"{second[-1]['seconds']:.1f}; gap mean/max {first[0]['logprob_gap_mean']:.4f}/"
        f"{first[0]['logprob_gap_max']:.4f}"
    )
    assert -12.0 < before < -5.0  # rare without the hint: RL alone would seldom sample it
    assert with_hint > before + 2.0  # the hint makes it likely: OPD has a signal
    assert after > before + 1.0
    assert after_held_out > before_held_out + 0.5  # it generalises to unseen prompts
    # The trainer reproduces the sampler's log-probs of the very same tokens up to the noise
    # added (E|N(0, 0.02²)| ≈ 0.016): token alignment is right and the gap metric is measured.
    assert 0.005 < first[0]["logprob_gap_mean"] < 0.05
    assert first[0]["logprob_gap_max"] < 0.15
    # On the second update the stored log-probs are the base's, the policy is v1's.
    assert second[0]["logprob_gap_mean"] > first[0]["logprob_gap_mean"]
