"""Does Parley's training fit and run on this GPU? A check for a bare GPU box, in minutes.

    python bench/gpu_train_check.py [--tokenizer DIR] [--out FILE]
    python bench/gpu_train_check.py --cpu --tiny        # the same path on the CPU (CI)

Needs Python with torch, transformers, peft and accelerate, and this repository's ``trainer/``
(no vLLM, no Django, no network: nothing is downloaded). It builds a randomly initialised model
of Qwen3-4B's shape (36 layers, 2560 wide, 32/8 heads, 9728 MLP; the vocabulary is the
tokenizer's) directly on the GPU in bf16, with the base model's tokenizer (SmolLM2's, from the
prepared folder under PARLEY_MODELS_DIR, or --tokenizer). Then, timed:

1. the real update (``trainer.update.run_update``, the defaults: 2 steps, micro-batches of
   4096 tokens, gradient checkpointing) on 8 samples of ~1k tokens;
2. the probe gate on the in-memory model (``trainer.probing.probe_model``);
3. the largest micro-batch that fits: one forward and backward pass at 1k, 2k, 4k, ... tokens
   until the GPU runs out (or --max-probe-tokens);
4. the multi-process path with one process (``trainer.distributed``: accelerate on a GPU,
   torchrun on the CPU), which loads the model from a folder this writes first;
5. several people in one step from that folder: 8 people × 8 short answers, one
   ``trainer.multi_person.run_updates`` against one ``run_update`` each
   (``bench.multi_person_step.compare``: samples/s of each, the ratio, the adapters' largest
   difference).

It prints each figure and writes them all to a JSON file (--out). The estimate of
``trainer.gpu_memory`` is printed beside the measured peak, so the arithmetic can be checked.
Exit status: 0 when every leg ran, 1 when one failed (the JSON says which), 2 without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from bench.gpu_memory_probe import gpu_peaks, largest_micro_batch, reset_peaks  # noqa: E402
from bench.multi_person_step import leg_status, multi_person_leg  # noqa: E402
from trainer.batch import Sample, chat_prompt_ids  # noqa: E402
from trainer.config import UpdateConfig  # noqa: E402
from trainer.distributed import run_update_launched  # noqa: E402
from trainer.gpu_memory import SHAPES, ModelShape, anchor_token_count, memory_budget  # noqa: E402
from trainer.policy import (  # noqa: E402
    policy_from_base,
    release_memory,
    resolve_base_dtype,
    uses_gradient_checkpointing,
)
from trainer.probes import PROBE_PROMPTS, PROBE_TEXT  # noqa: E402
from trainer.probing import probe_model  # noqa: E402
from trainer.update import run_update  # noqa: E402

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
FOUR_B = SHAPES["4B (Qwen3-4B)"]
TINY = ModelShape(layers=2, hidden=64, intermediate=128, vocab=0, heads=4, kv_heads=2, head_dim=16)


def say(message: str) -> None:
    print(f"gpu_train_check | {message}", flush=True)


def default_tokenizer_dir() -> Path:
    models = Path(os.environ.get("PARLEY_MODELS_DIR") or ROOT / "var" / "models")
    return models / DEFAULT_MODEL


def build_model(
    shape: ModelShape, vocab: int, tokenizer: Any, dtype: torch.dtype, device: torch.device
) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 of the given shape, built where it will run."""
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=8192 if shape.layers > 2 else 2048,
        tie_word_embeddings=shape.tied_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def make_samples(tokenizer: Any, count: int, tokens: int, vocab: int) -> list[Sample]:
    """``count`` samples of about ``tokens`` tokens: a real chat prompt, a random answer;
    rewards ±1, every third with a hint (OPD) and one with a correction (SFT)."""
    generator = torch.Generator().manual_seed(0)
    samples = []
    for i in range(count):
        words = PROBE_TEXT.split()
        text = " ".join(words[: 10 + 7 * i])
        prompt = chat_prompt_ids(tokenizer, [{"role": "user", "content": text}])
        answer = max(tokens - len(prompt), 8)
        response = torch.randint(3, vocab, (answer,), generator=generator).tolist()
        hint = "Answer in one sentence." if i % 3 == 0 else None
        teacher = (
            chat_prompt_ids(tokenizer, [{"role": "user", "content": f"{text}\n\n[Hint] {hint}"}])
            if hint
            else None
        )
        samples.append(
            Sample(
                prompt,
                response,
                [-8.0] * answer,
                reward=1.0 if i % 2 else -1.0,
                hint=hint,
                teacher_prompt_token_ids=teacher,
                correction_token_ids=response[: answer // 2] if i == count - 1 else None,
            )
        )
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", type=Path, default=None, help="a model folder's tokenizer")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (no GPU needed)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer, 64-wide model")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=None, help="per sample (1024; tiny: 96)")
    parser.add_argument("--max-probe-tokens", type=int, default=None)
    parser.add_argument("--skip-launched", action="store_true", help="leave out leg 4")
    parser.add_argument("--skip-multi-person", action="store_true", help="leave out leg 5")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results" / "gpu_train_check.json"
    )
    args = parser.parse_args(argv)
    began = time.monotonic()
    if not args.cpu and not torch.cuda.is_available():
        print(
            "gpu_train_check: error: no CUDA GPU visible to torch "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda}); check nvidia-smi "
            "and the driver version, or pass --cpu --tiny to run the path on the CPU",
            file=sys.stderr,
        )
        return 2
    tokenizer_dir = args.tokenizer or default_tokenizer_dir()
    if not (tokenizer_dir / "tokenizer_config.json").is_file():
        print(f"gpu_train_check: error: no tokenizer in {tokenizer_dir}", file=sys.stderr)
        return 2
    # A bare box runs no vLLM: the whole GPU is the trainer's (the budget check reads this).
    os.environ.setdefault("PARLEY_TRAIN_VLLM_SHARE", "0")
    device = torch.device("cpu" if args.cpu else "cuda")
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    vocab = len(tokenizer)
    shape = TINY if args.tiny else FOUR_B
    shape = ModelShape(**{**shape.__dict__, "vocab": vocab})
    tokens = args.tokens or (96 if args.tiny else 1024)
    config = UpdateConfig(micro_batch_tokens=max(UpdateConfig().micro_batch_tokens, tokens))
    dtype = resolve_base_dtype(config, device)
    checkpointing = uses_gradient_checkpointing(config, device)
    gpu_gib = torch.cuda.get_device_properties(device).total_memory / 2**30 if not args.cpu else 0
    estimate = memory_budget(
        shape,
        dtype_bytes=torch.tensor([], dtype=dtype).element_size(),
        lora_rank=config.lora_rank,
        target_modules=config.target_modules,
        micro_batch_tokens=config.micro_batch_tokens,
        gradient_checkpointing=checkpointing,
        gpu_gib=gpu_gib,
        vllm_share=0.0,
        anchor_tokens=anchor_token_count(config, None),
    )
    figures: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "model": {**shape.__dict__, "parameters": shape.parameters, "dtype": str(dtype)},
        "gradient_checkpointing": checkpointing,
        "samples": args.samples,
        "tokens_per_sample": tokens,
        "estimate": estimate.as_dict(),
        "failures": [],
    }
    say(f"device {figures['device']}, torch {torch.__version__} (CUDA {torch.version.cuda})")
    say(f"model: {shape.parameters / 1e6:,.1f} M parameters, {dtype}, vocabulary {vocab}")
    say(f"estimate: {estimate.explain()}")

    started = time.perf_counter()
    base = build_model(shape, vocab, tokenizer, dtype, device)
    model = policy_from_base(base, config, device=device)
    figures["build_seconds"] = time.perf_counter() - started
    samples = make_samples(tokenizer, args.samples, tokens, vocab)
    response_tokens = sum(len(s.response_token_ids) for s in samples)

    with tempfile.TemporaryDirectory(prefix="gpu-train-check-") as scratch:
        folder = Path(scratch)
        # 1. The update, on the model in memory; its folder holds only the tokenizer (the
        # language anchor tokenises its paragraphs with it).
        tokenizer.save_pretrained(folder / "tokenizer")
        reset_peaks(device)
        started = time.perf_counter()
        *steps, summary = run_update(
            config,
            samples,
            base_model_dir=folder / "tokenizer",
            init_adapter_dir=None,
            out_adapter_dir=folder / "adapter",
            device=device,
            model=model,
        )
        update_seconds = time.perf_counter() - started
        figures["update"] = {
            "seconds": update_seconds,
            "steps": [
                {k: s.get(k) for k in ("loss", "grad_norm", "tokens_per_second", "seconds")}
                for s in steps
            ],
            "micro_batches": summary["micro_batches"],
            "tokens_per_second": response_tokens * config.steps_per_batch / update_seconds,
            # run_update reads its peak before it releases memory (which resets the counters).
            **_update_peaks(summary),
        }
        say(
            f"update: {update_seconds:.1f} s for {args.samples} samples × {tokens} tokens × "
            f"{config.steps_per_batch} steps, {figures['update']['tokens_per_second']:.0f} "
            f"tokens/s; peak {_gib(figures['update'])}"
        )
        # 2. The probe gate on the same model.
        reset_peaks(device)
        started = time.perf_counter()
        candidate, base_figures = probe_model(model, tokenizer, PROBE_PROMPTS, PROBE_TEXT)
        figures["gate"] = {
            "seconds": time.perf_counter() - started,
            "probe": candidate,
            "base_probe": base_figures,
            **gpu_peaks(device),
        }
        say(f"gate: {figures['gate']['seconds']:.1f} s; peak {_gib(figures['gate'])}")
        # 3. The largest micro-batch that fits.
        limit = args.max_probe_tokens or (4 * tokens if args.tiny else 65536)
        figures["largest_micro_batch"] = largest_micro_batch(
            model, vocab, device, start=tokens, limit=limit, deadline=began + 180
        )
        say(f"largest micro-batch that fits: {figures['largest_micro_batch']['largest_tokens']}")
        # 4. The launched path with one process, from a folder.
        del model, base
        release_memory(device)
        if not args.skip_launched:
            figures["launched"] = launched_leg(config, samples, tokenizer, shape, folder, device)
            say(f"launched ({figures['launched']['launcher']}): {_status(figures['launched'])}")
        if not args.skip_multi_person:
            save_base(config, tokenizer, shape, folder, device)
            figures["multi_person"] = multi_person_leg(tokenizer, folder / "base", device)
            say(f"several people in one step: {leg_status(figures['multi_person'])}")
        figures["failures"] += [
            leg for leg in ("launched", "multi_person") if not figures.get(leg, {"ok": True})["ok"]
        ]
    figures["total_seconds"] = time.monotonic() - began
    figures["django_imported"] = any(sys.modules.get(name) for name in ("django", "webapp"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    say(f"total {figures['total_seconds']:.0f} s; figures in {args.out}")
    return 1 if figures["failures"] else 0


def launched_leg(
    config: UpdateConfig,
    samples: list[Sample],
    tokenizer: Any,
    shape: ModelShape,
    folder: Path,
    device: torch.device,
) -> dict[str, Any]:
    """Save the model, then run the update as one launched process that loads it."""
    launcher = "accelerate" if device.type == "cuda" else "torchrun"
    result: dict[str, Any] = {"launcher": launcher, "ok": False}
    try:
        result["save_seconds"] = save_base(config, tokenizer, shape, folder, device)
        started = time.perf_counter()
        metrics = list(
            run_update_launched(
                config,
                samples,
                base_model_dir=folder / "base",
                init_adapter_dir=None,
                out_adapter_dir=folder / "launched",
                processes=1,
                launcher=launcher,
            )
        )
        result["seconds"] = time.perf_counter() - started
        summary = metrics[-1]
        result["ok"] = bool(summary.get("done")) and (folder / "launched").is_dir()
        result["update_seconds"] = summary.get("seconds")
        result["peak_gpu_mb"] = summary.get("peak_gpu_mb")
        result["peak_gpu_reserved_mb"] = summary.get("peak_gpu_reserved_mb")
    except Exception as exc:  # noqa: BLE001 - a failed leg is a figure, not a crash
        result["error"] = "".join(traceback.format_exception_only(exc)).strip()[-2000:]
    return result


def save_base(
    config: UpdateConfig, tokenizer: Any, shape: ModelShape, folder: Path, device: torch.device
) -> float:
    """Write the random model and its tokenizer to ``folder / "base"`` once; the seconds."""
    if (folder / "base" / "config.json").is_file():
        return 0.0
    started = time.perf_counter()
    model = build_model(shape, shape.vocab, tokenizer, resolve_base_dtype(config, device), device)
    model.save_pretrained(folder / "base", safe_serialization=True)
    tokenizer.save_pretrained(folder / "base")
    del model
    release_memory(device)
    return time.perf_counter() - started


def _update_peaks(summary: dict[str, Any]) -> dict[str, float | None]:
    allocated, reserved = summary.get("peak_gpu_mb"), summary.get("peak_gpu_reserved_mb")
    return {
        "peak_allocated_gib": allocated / 1024 if allocated is not None else None,
        "peak_reserved_gib": reserved / 1024 if reserved is not None else None,
    }


def _gib(figures: dict[str, Any]) -> str:
    if figures.get("peak_allocated_gib") is None:
        return "n/a on the CPU"
    return (
        f"{figures['peak_allocated_gib']:.1f} GiB allocated, "
        f"{figures['peak_reserved_gib']:.1f} GiB reserved"
    )


def _status(result: dict[str, Any]) -> str:
    if result["ok"]:
        return f"ok in {result['seconds']:.1f} s (save {result['save_seconds']:.1f} s)"
    return f"FAILED: {result.get('error')}"


if __name__ == "__main__":
    sys.exit(main())
