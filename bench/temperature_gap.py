"""The trainer–sampler log-prob gap at the chat temperature (0.7), on the real model.

vLLM samples six answers at T=0.7 with ``--logprobs-mode processed_logprobs`` (what Parley's
vLLM command sets): the log-probs of the distribution it sampled from. The trainer then scores
the same tokens (``trainer.policy.token_logprobs``) with its logits divided by the recorded
temperature, as training does, and, for comparison, without (what it did before). The figure
is ``trainer.policy_gradient.logprob_gap``'s: mean and max |trainer − served| per answer token.

Run: ``.venv/bin/python bench/temperature_gap.py [MODEL_DIR]`` (about a minute on two cores,
vLLM's CPU engine in fp32).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPTS = (
    "What is the capital of France?",
    "Name a fruit that is yellow.",
    "How many legs does a spider have?",
    "What do bees make?",
    "Give me three tips for sleeping better.",
    "Write one sentence about the sea.",
)
TEMPERATURE = 0.7


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM, SamplingParams

    from trainer.batch import chat_prompt_ids, collate
    from trainer.policy import token_logprobs

    default = Path(os.environ.get("PARLEY_MODELS_DIR", "var/models")) / "SmolLM2-135M-Instruct"
    model_dir = sys.argv[1] if len(sys.argv) > 1 else str(default)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = [chat_prompt_ids(tokenizer, [{"role": "user", "content": p}]) for p in PROMPTS]
    llm = LLM(
        model=model_dir,
        dtype="float32",
        max_model_len=512,
        logprobs_mode="processed_logprobs",
        enforce_eager=True,
    )
    params = SamplingParams(temperature=TEMPERATURE, max_tokens=24, logprobs=0, seed=0)
    answers, served = [], []
    for output in llm.generate([{"prompt_token_ids": ids} for ids in prompts], params):
        choice = output.outputs[0]
        answers.append(list(choice.token_ids))
        logprobs = choice.logprobs or []
        served.append([lp[t].logprob for t, lp in zip(choice.token_ids, logprobs, strict=True)])
    del llm
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    batch = collate(
        prompts, answers, target_logprobs=served, temperatures=[TEMPERATURE] * len(answers)
    )
    mask = batch.target_mask_B_T.bool()
    figures = {"temperature": TEMPERATURE, "tokens": int(mask.sum())}
    with torch.no_grad():
        for name, temperature_B in (("scaled", batch.temperature_B), ("unscaled", None)):
            logp = token_logprobs(
                model,
                batch.input_ids_B_T,
                batch.attention_mask_B_T,
                batch.target_mask_B_T,
                temperature_B,
            )
            gap = (logp - batch.target_logp_B_T).abs()[mask]
            figures[f"gap_mean_{name}"] = float(gap.mean())
            figures[f"gap_max_{name}"] = float(gap.max())
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
