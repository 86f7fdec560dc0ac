"""The trainer–sampler log-prob gap at the chat temperature (0.7), on the real model.

vLLM samples six answers at T=0.7 with ``--logprobs-mode processed_logprobs`` (what Parley's
vLLM command sets): the log-probs of the distribution it sampled from. The trainer then scores
the same tokens (``trainer.policy.token_logprobs``) with its logits divided by the recorded
temperature, as training does, and, for comparison, without (what it did before). The figure
is ``trainer.policy_gradient.logprob_gap``'s: mean and max |trainer − served| per answer token.

Run: ``.venv/bin/python bench/temperature_gap.py [MODEL_DIR] [--engine=llamacpp]`` (about a
minute on two cores; vLLM's CPU engine in fp32 in process, or the llama.cpp engine as `serve`
starts it, f16 weights).
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


def vllm_answers(model_dir: str, prompts: list[list[int]]) -> tuple[list, list]:
    """vLLM's sampled token ids and their log-probs, in process."""
    from vllm import LLM, SamplingParams

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
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
    return answers, served


def llamacpp_answers(model_dir: str, prompts: list[list[int]]) -> tuple[list, list]:
    """The llama.cpp engine's (webapp.infra.llamacpp_server, as `serve` starts it)."""
    import httpx

    from bench.engine_servers import running_llamacpp
    from trainer.base_model import fetch_gguf

    gguf = fetch_gguf(cache_dir=Path(model_dir).parent.parent / "cache")
    answers, served = [], []
    with running_llamacpp(Path(model_dir), gguf, max_model_len=512) as server:
        for index, prompt in enumerate(PROMPTS):
            body = {
                "model": "base",
                "messages": [{"role": "user", "content": prompt}],
                "temperature": TEMPERATURE,
                "max_tokens": 24,
                "seed": index,
                "logprobs": True,
                "return_token_ids": True,
            }
            answer = httpx.post(
                server.url + "/chat/completions", json=body, headers=server.headers, timeout=120
            ).json()
            assert answer["prompt_token_ids"] == prompts[index], "the prompts differ"
            choice = answer["choices"][0]
            answers.append(choice["token_ids"])
            served.append([item["logprob"] for item in choice["logprobs"]["content"]])
    return answers, served


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.batch import chat_prompt_ids, collate
    from trainer.policy import token_logprobs

    args = [a for a in sys.argv[1:] if not a.startswith("--engine=")]
    engine = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--engine=")), "vllm")
    default = Path(os.environ.get("PARLEY_MODELS_DIR", "var/models")) / "SmolLM2-135M-Instruct"
    model_dir = args[0] if args else str(default)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = [chat_prompt_ids(tokenizer, [{"role": "user", "content": p}]) for p in PROMPTS]
    sampler = llamacpp_answers if engine == "llamacpp" else vllm_answers
    answers, served = sampler(model_dir, prompts)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    batch = collate(
        prompts, answers, target_logprobs=served, temperatures=[TEMPERATURE] * len(answers)
    )
    mask = batch.target_mask_B_T.bool()
    figures = {"engine": engine, "temperature": TEMPERATURE, "tokens": int(mask.sum())}
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
