"""CPU engines for the same model: vLLM (cpu) vs transformers `generate` vs llama.cpp.

    python -m bench.cpu_engines [--tokens 64]

Tokens per second at batch 1 and 8 (greedy, the same prompts), all in one run: how far
Parley's serving engine is from the fastest CPU engine. llama.cpp serves the Q4_1 GGUF that
the base model ships as (var/cache/…gguf); vLLM and transformers serve the fp32 safetensors
folder made from it. llama.cpp needs `pip install llama-cpp-python` (it compiles, ~10 min);
without it that row says so.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from bench.common import ROOT, record, running_system

PROMPTS = [
    "Explain what a hash map is.",
    "Give me three tips for writing clear emails.",
    "What causes the seasons on Earth?",
    "Describe a cat to someone who has never seen one.",
    "Why is the sky blue?",
    "List four fruits that are red.",
    "What is the difference between a list and a tuple in Python?",
    "Write a haiku about the sea.",
]
MODEL_DIR = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
GGUF = ROOT / "var" / "cache" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def transformers_tps(batch: int, tokens: int) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(MODEL_DIR), padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(str(MODEL_DIR), dtype=torch.float32).eval()
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
        )
        for p in PROMPTS[:batch]
    ]
    inputs = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        model.generate(**inputs, max_new_tokens=4, do_sample=False)  # warm-up
        started = time.perf_counter()
        out = model.generate(
            **inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False
        )
    generated = (out.shape[1] - inputs["input_ids"].shape[1]) * batch
    return generated / (time.perf_counter() - started)


def llamacpp_tps(batch: int, tokens: int) -> float | None:
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=str(GGUF), n_ctx=2048, n_threads=2, verbose=False)
    llm.create_chat_completion(messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    started = time.perf_counter()
    produced = 0
    for prompt in PROMPTS[:batch]:  # llama-cpp-python serves one sequence at a time
        out = llm.create_chat_completion(
            messages=[{"role": "user", "content": prompt}], max_tokens=tokens, temperature=0
        )
        produced += out["usage"]["completion_tokens"]
    return produced / (time.perf_counter() - started)


async def vllm_tps(url: str, batch: int, tokens: int, headers: dict[str, str]) -> float:
    async with httpx.AsyncClient(timeout=600, headers=headers) as client:

        async def one(prompt: str) -> int:
            body = {
                "model": "base",
                "max_tokens": tokens,
                "temperature": 0,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": prompt}],
            }
            response = await client.post(url + "/chat/completions", json=body)
            return response.json()["usage"]["completion_tokens"]

        await one("hi")
        started = time.perf_counter()
        produced = sum(await asyncio.gather(*(one(p) for p in PROMPTS[:batch])))
        return produced / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    figures: dict[str, dict[str, float | None]] = {}
    with running_system({"PARLEY_SERVE": "1"}) as system:
        figures["vllm"] = {
            f"batch_{b}": asyncio.run(
                vllm_tps(system.vllm_url, b, args.tokens, system.vllm_headers)
            )
            for b in (1, 8)
        }
    # vLLM is stopped before the others run, so each engine has the cores to itself.
    figures["transformers"] = {f"batch_{b}": transformers_tps(b, args.tokens) for b in (1, 8)}
    figures["llama.cpp"] = {f"batch_{b}": llamacpp_tps(b, args.tokens) for b in (1, 8)}
    fastest = {
        b: max(v for v in (e[b] for e in figures.values()) if v) for b in ("batch_1", "batch_8")
    }
    print(f"\n{'engine':<14}{'batch 1 tok/s':>15}{'batch 8 tok/s':>15}")
    for engine, row in figures.items():
        cells = [f"{row[b]:.1f}" if row[b] else "not installed" for b in ("batch_1", "batch_8")]
        print(f"{engine:<14}{cells[0]:>15}{cells[1]:>15}")
    vllm = figures["vllm"]
    print(
        f"vLLM vs fastest: batch 1 {vllm['batch_1'] / fastest['batch_1']:.2f}×, "
        f"batch 8 {vllm['batch_8'] / fastest['batch_8']:.2f}×"
    )
    record("cpu_engines", {"tokens": args.tokens, "tokens_per_second": figures})


if __name__ == "__main__":
    main()
