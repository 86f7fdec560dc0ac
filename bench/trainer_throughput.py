"""Trainer throughput: Parley's update step vs. TRL's GRPO loss on the same batch, same model.

What is compared: one optimizer step of the same PPO-clip (DAPO token-mean, clip 0.2/0.28,
no KL) loss over the same 8 samples of ~100 response tokens, LoRA r=16 on q/k/v/o, fp32, on
SmolLM2-135M-Instruct:

- parley: ``trainer.update.run_update`` (algorithm "rl"), micro-batch 8; the per-step
  ``seconds`` it reports (forward, loss, backward, grad clip, AdamW).
- trl: ``GRPOTrainer._compute_loss`` of TRL 1.16 — its per-token log-probs through the fused
  LM head it patches onto the model (which also computes the entropy it logs) and its
  ``loss_type="dapo"`` loss — then backward, grad clip and the optimizer TRL creates, on
  inputs built as its generation step would (left-padded prompts, right-padded completions,
  advantages, old log-probs). Generation and reward scoring are not timed on either side.

Each side runs in its own subprocess (so peak RSS is its own): one warm-up step, then timed
steps; tokens/s = response tokens per step / median step seconds. Run:
``.venv/bin/python bench/trainer_throughput.py`` (about two minutes on two cores).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODEL_DIR = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
TIMED_STEPS = 3
BATCH = 8
RESPONSE_TOKENS = 100


def _batch() -> list[Any]:
    """Eight samples: real chat prompts, 92..106 response tokens of plain English, rewards ±1.

    The sampler log-probs are the base model's own, so Parley's truncated importance weights
    are exactly 1 and both sides compute the same loss (checked on the first step).
    """
    import torch
    from transformers import AutoTokenizer

    from trainer.batch import Sample, chat_prompt_ids, collate
    from trainer.config import UpdateConfig
    from trainer.policy import load_policy, token_logprobs
    from trainer.probes import PROBE_TEXT

    tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
    words = tokenizer(PROBE_TEXT * 3, add_special_tokens=False)["input_ids"]
    prompts, responses = [], []
    for index in range(BATCH):
        messages = [{"role": "user", "content": f"Tell me story {index}."}]
        prompts.append(chat_prompt_ids(tokenizer, messages))
        length = RESPONSE_TOKENS - 8 + 2 * index  # ragged, as real answers are
        responses.append(words[index * 7 : index * 7 + length])
    batch = collate(prompts, responses)
    with torch.no_grad():
        logp_B_T = token_logprobs(
            load_policy(MODEL_DIR, UpdateConfig()),
            batch.input_ids_B_T,
            batch.attention_mask_B_T,
            batch.target_mask_B_T,
        )
    return [
        Sample(
            prompt,
            response,
            logp_B_T[row, len(prompt) : len(prompt) + len(response)].tolist(),
            reward=1.0 if row % 2 == 0 else -1.0,
        )
        for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True))
    ]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_parley() -> dict[str, Any]:
    from trainer.config import UpdateConfig
    from trainer.update import run_update

    samples = _batch()
    # The loss TRL computes too: PPO-clip alone, without the language anchor TRL has no match for.
    config = UpdateConfig(
        algorithm="rl",
        steps_per_batch=1 + TIMED_STEPS,
        micro_batch_size=BATCH,
        anchor_coef=0.0,
    )
    with tempfile.TemporaryDirectory() as out:
        results = list(
            run_update(
                config,
                samples,
                base_model_dir=MODEL_DIR,
                init_adapter_dir=None,
                out_adapter_dir=out,
            )
        )
    steps = results[:-1]
    return {
        "step_seconds": [s["seconds"] for s in steps[1:]],
        "warmup_seconds": steps[0]["seconds"],
        "first_step_loss": steps[0]["pg_loss"],
        "logprob_gap_max": steps[0]["logprob_gap_max"],
        "tokens": steps[0]["tokens"],
        "update_seconds_total": results[-1]["seconds"],
        "peak_rss_mb": _peak_rss_mb(),
    }


def run_trl() -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from trainer.config import UpdateConfig

    samples = _batch()
    config = UpdateConfig()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out,
            use_cpu=True,
            per_device_train_batch_size=BATCH,
            num_generations=BATCH,
            loss_type="dapo",
            epsilon=config.clip_low,
            epsilon_high=config.clip_high,
            beta=0.0,
            learning_rate=config.lr,
            max_grad_norm=config.max_grad_norm,
            report_to=[],
            bf16=False,
            fp16=False,
            gradient_checkpointing=False,
        )
        peft = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            lora_dropout=0.0,
            target_modules=list(config.target_modules),
            task_type="CAUSAL_LM",
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **_: [0.0] * len(completions),
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["hi"] * BATCH}),
            peft_config=peft,
        )
    trainer.current_gradient_accumulation_steps = 1
    policy = trainer.model
    policy.train()
    optimizer = trainer.create_optimizer()
    params = [p for p in policy.parameters() if p.requires_grad]

    width_p = max(len(s.prompt_token_ids) for s in samples)
    width_c = max(len(s.response_token_ids) for s in samples)
    prompt_ids = torch.zeros(BATCH, width_p, dtype=torch.long)
    prompt_mask = torch.zeros(BATCH, width_p, dtype=torch.long)
    completion_ids = torch.zeros(BATCH, width_c, dtype=torch.long)
    completion_mask = torch.zeros(BATCH, width_c, dtype=torch.long)
    for row, s in enumerate(samples):  # TRL pads prompts on the left, completions on the right
        p, c = len(s.prompt_token_ids), len(s.response_token_ids)
        prompt_ids[row, width_p - p :] = torch.tensor(s.prompt_token_ids)
        prompt_mask[row, width_p - p :] = 1
        completion_ids[row, :c] = torch.tensor(s.response_token_ids)
        completion_mask[row, :c] = 1
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": torch.tensor([s.reward for s in samples]),
        "num_items_in_batch": completion_mask.sum(),
    }

    seconds, losses = [], []
    for step in range(1 + TIMED_STEPS):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = trainer._compute_loss(policy, inputs)
        loss.backward()
        losses.append(float(loss.detach()))
        torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        optimizer.step()
        if step == 0:
            # old log-probs as TRL keeps them from the generation step: the policy before it
            # moved (step 0 used per_token_logps.detach() itself, as TRL does)
            with torch.no_grad():
                inputs["old_per_token_logps"] = trainer._get_per_token_logps_and_entropies(
                    policy,
                    torch.cat([prompt_ids, completion_ids], 1),
                    torch.cat([prompt_mask, completion_mask], 1),
                    width_c,
                )[0]
        seconds.append(time.perf_counter() - started)
    return {
        "step_seconds": seconds[1:],
        "warmup_seconds": seconds[0],
        "first_step_loss": losses[0],
        "tokens": int(completion_mask.sum()),
        "peak_rss_mb": _peak_rss_mb(),
    }


def _side(name: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, __file__, "--side", name], capture_output=True, text=True, cwd=ROOT
    )
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    figures["tokens_per_second"] = figures["tokens"] / statistics.median(figures["step_seconds"])
    return figures


def main() -> None:
    from bench.common import record

    if not (MODEL_DIR / "model.safetensors").exists():
        raise SystemExit(f"no base model at {MODEL_DIR}: run `make model` first")
    parley, trl = _side("parley"), _side("trl")
    ratio = parley["tokens_per_second"] / trl["tokens_per_second"]
    for name, figures in (("parley", parley), ("trl", trl)):
        steps = ", ".join(f"{s:.2f}" for s in figures["step_seconds"])
        print(
            f"{name:>6}: {figures['tokens_per_second']:.1f} tok/s (steps {steps} s, "
            f"warm-up {figures['warmup_seconds']:.2f} s), peak RSS {figures['peak_rss_mb']:.0f} MB"
        )
    print(
        f"first-step loss: parley {parley['first_step_loss']:.6f}, "
        f"trl {trl['first_step_loss']:.6f} (the same loss on the same batch)"
    )
    print(f"parley / trl throughput: {ratio:.2f}x")
    record(
        "trainer_throughput",
        {
            "figures": {
                "parley": parley,
                "trl": trl,
                "throughput_ratio": ratio,
                "batch": BATCH,
                "response_tokens": parley["tokens"],
            }
        },
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--side":
        side = {"parley": run_parley, "trl": run_trl}[sys.argv[2]]
        print(json.dumps(side()))
    else:
        main()
