"""Several people in one step: ``run_updates`` against one ``run_update`` per person.

    python -m bench.multi_person_step [--people 8] [--samples 8] [--model DIR] [--routing]

K people, each with a batch of short answers of their own (a real chat prompt, an answer of 12
to 40 tokens cut from plain English, rewards ±1, every fourth answer with a hint), each with a
new adapter, trained with the default config on the real base model (SmolLM2-135M-Instruct
from PARLEY_MODELS_DIR, or --model). Side by side in one run:

- sequential: ``trainer.update.run_update`` once per person, each loading the base model as a
  training update does;
- stacked: ``trainer.multi_person.run_updates`` once for all of them.

It prints samples per second of each, their ratio, where the time went (loading and planning
against the steps), and the largest difference between the two paths' adapters, then appends
the figures to bench/results.jsonl. ``--routing`` also times one forward and backward pass over
every person's rows through three ways of routing rows to adapters: the runs of
``trainer.stacked_lora`` (what the trainer uses), a gathered batched matmul, and peft's
mixed-batch forward (``adapter_names``, which peft allows only in eval mode).

``compare`` is also what ``bench/gpu_train_check.py`` runs on a GPU; this module imports only
torch, transformers, peft and ``trainer`` at the top, as that script needs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from tqdm import tqdm

from trainer.batch import Sample, chat_prompt_ids, hinted_prompt_ids
from trainer.config import UpdateConfig
from trainer.multi_person import PersonJob, run_updates
from trainer.probes import PROBE_PROMPTS, PROBE_TEXT
from trainer.update import run_update

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = "SmolLM2-135M-Instruct"
HINT = "Answer in one short sentence."


def default_model_dir() -> Path:
    return Path(os.environ.get("PARLEY_MODELS_DIR") or ROOT / "var" / "models") / DEFAULT_MODEL


def people_samples(tokenizer: Any, people: int, samples: int, vocab: int) -> list[list[Sample]]:
    """Each person's batch: chat prompts, ragged short answers, ±1, every fourth hinted."""
    words = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
    generator = torch.Generator().manual_seed(0)
    batches = []
    for person in range(people):
        batch = []
        for i in range(samples):
            question = f"{PROBE_PROMPTS[(person + i) % len(PROBE_PROMPTS)]} (question {i})"
            messages = [{"role": "user", "content": question}]
            length = 12 + (7 * person + 5 * i) % 29
            start = (3 * person + 11 * i) % max(len(words) - length, 1)
            answer = [t % vocab for t in words[start : start + length]]
            hinted = i % 4 == 3
            batch.append(
                Sample(
                    chat_prompt_ids(tokenizer, messages),
                    answer,
                    (-torch.rand(len(answer), generator=generator) * 3 - 0.5).tolist(),
                    reward=1.0 if (person + i) % 2 else -1.0,
                    hint=HINT if hinted else None,
                    teacher_prompt_token_ids=hinted_prompt_ids(tokenizer, messages, HINT)
                    if hinted
                    else None,
                )
            )
        batches.append(batch)
    return batches


def compare(
    config: UpdateConfig,
    batches: list[list[Sample]],
    *,
    base_model_dir: Path,
    folder: Path,
    device: torch.device,
) -> dict[str, Any]:
    """Both paths on the same people, side by side; their figures and the largest difference
    between the adapters each trained."""
    people, total = len(batches), sum(len(batch) for batch in batches)
    jobs = [
        PersonJob(config, batch, None, folder / "stacked" / f"person-{k}")
        for k, batch in enumerate(batches)
    ]
    started, cpu_started = time.perf_counter(), time.process_time()
    setup = 0.0
    for job in tqdm(jobs, desc="sequential (run_update each)", unit="person"):
        out = folder / "sequential" / Path(job.out_adapter_dir).name
        *_, summary = run_update(
            job.config,
            job.samples,
            base_model_dir=base_model_dir,
            init_adapter_dir=None,
            out_adapter_dir=out,
            device=device,
        )
        setup += summary["setup_seconds"]
    _sync(device)
    sequential = time.perf_counter() - started
    sequential_cpu = time.process_time() - cpu_started
    started, cpu_started = time.perf_counter(), time.process_time()
    updates = people * (config.steps_per_batch + 1)
    summaries = []
    with tqdm(total=updates, desc="stacked (run_updates)", unit="step") as bar:
        for _, metrics in run_updates(jobs, base_model_dir=base_model_dir, device=device):
            bar.update()
            if metrics.get("done"):
                summaries.append(metrics)
    _sync(device)
    stacked = time.perf_counter() - started
    stacked_cpu = time.process_time() - cpu_started
    return {
        "people": people,
        "samples": total,
        "steps_per_batch": config.steps_per_batch,
        "response_tokens": sum(len(s.response_token_ids) for b in batches for s in b),
        "sequential_seconds": sequential,
        "sequential_setup_seconds": setup,
        "stacked_seconds": stacked,
        "stacked_setup_seconds": summaries[0]["setup_seconds"],
        "sequential_samples_per_second": total / sequential,
        "stacked_samples_per_second": total / stacked,
        "speedup": sequential / stacked,
        # CPU seconds of this process: on a machine others share, less noisy than wall time
        "sequential_cpu_seconds": sequential_cpu,
        "stacked_cpu_seconds": stacked_cpu,
        "cpu_speedup": sequential_cpu / stacked_cpu,
        **_differences(folder, people),
    }


def multi_person_leg(
    tokenizer: Any, base_model_dir: Path, device: torch.device, *, people: int = 8, samples: int = 8
) -> dict[str, Any]:
    """``compare`` on a saved base model with the default config, as leg 5 of
    ``bench/gpu_train_check.py`` runs it: a failure is a figure (``"ok"``, ``"error"``)."""
    result: dict[str, Any] = {"ok": False}
    try:
        batches = people_samples(tokenizer, people, samples, len(tokenizer))
        with tempfile.TemporaryDirectory(prefix="multi-person-") as scratch:
            result.update(
                compare(
                    UpdateConfig(),
                    batches,
                    base_model_dir=base_model_dir,
                    folder=Path(scratch),
                    device=device,
                )
            )
        result["ok"] = True
    except Exception as exc:  # noqa: BLE001 - a failed leg is a figure, not a crash
        result["error"] = "".join(traceback.format_exception_only(exc)).strip()[-2000:]
    return result


def leg_status(result: dict[str, Any]) -> str:
    """The leg's figures in one line."""
    if not result["ok"]:
        return f"FAILED: {result.get('error')}"
    return (
        f"{result['stacked_samples_per_second']:.1f} samples/s stacked vs "
        f"{result['sequential_samples_per_second']:.1f} one by one ({result['speedup']:.2f}×), "
        f"adapters within {result['max_abs_adapter_difference']:.1e}"
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _differences(folder: Path, people: int) -> dict[str, float | int]:
    """The largest |stacked − sequential| over every adapter weight, and how many weights
    differ by more than 1e-5. A few do, by up to about the learning rate: AdamW's first step
    is lr·g/(|g| + 1e-8), so a weight whose gradient is ~1e-9 (rounding noise beside a typical
    1e-3) moves by a noise-driven fraction of lr either way."""
    largest, over, total = 0.0, 0, 0
    for k in range(people):
        stacked = load_file(str(folder / "stacked" / f"person-{k}" / "adapter_model.safetensors"))
        alone = load_file(str(folder / "sequential" / f"person-{k}" / "adapter_model.safetensors"))
        for name, weights in alone.items():
            difference = (stacked[name] - weights).abs()
            largest = max(largest, float(difference.max()))
            over += int((difference > 1e-5).sum())
            total += difference.numel()
    return {
        "max_abs_adapter_difference": largest,
        "adapter_weights_over_1e-5": over,
        "adapter_weights": total,
    }


def say(figures: dict[str, Any]) -> None:
    print(
        f"multi_person_step | {figures['people']} people × "
        f"{figures['samples'] // figures['people']} samples, "
        f"{figures['steps_per_batch']} steps, on {figures.get('device', 'cpu')}\n"
        f"  sequential: {figures['sequential_seconds']:.1f} s "
        f"({figures['sequential_setup_seconds']:.1f} s loading and planning), "
        f"{figures['sequential_samples_per_second']:.2f} samples/s\n"
        f"  stacked:    {figures['stacked_seconds']:.1f} s "
        f"({figures['stacked_setup_seconds']:.1f} s loading and planning), "
        f"{figures['stacked_samples_per_second']:.2f} samples/s\n"
        f"  stacked / sequential: {figures['speedup']:.2f}× in wall time, "
        f"{figures['cpu_speedup']:.2f}× in CPU time "
        f"({figures['sequential_cpu_seconds']:.0f} vs {figures['stacked_cpu_seconds']:.0f} s); "
        f"largest |adapter difference| {figures['max_abs_adapter_difference']:.2e} "
        f"({figures['adapter_weights_over_1e-5']} of {figures['adapter_weights']:,} weights "
        "differ by more than 1e-5)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoTokenizer

    from bench.common import record
    from bench.multi_person_routing import routing_figures

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="the base model's folder")
    parser.add_argument("--people", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8, help="per person")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--routing", action="store_true", help="also time three routings")
    args = parser.parse_args(argv)
    model_dir = args.model or default_model_dir()
    if not (model_dir / "config.json").is_file():
        parser.error(f"no model in {model_dir}: run `make model`, or pass --model")
    device = torch.device(args.device)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    batches = people_samples(tokenizer, args.people, args.samples, len(tokenizer))
    with tempfile.TemporaryDirectory(prefix="multi-person-") as scratch:
        figures = compare(
            UpdateConfig(), batches, base_model_dir=model_dir, folder=Path(scratch), device=device
        )
    figures = {"device": str(device), "threads": torch.get_num_threads(), **figures}
    say(figures)
    if args.routing:
        figures["routing"] = routing_figures(model_dir, batches, device)
    record("multi_person_step", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
