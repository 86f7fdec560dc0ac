"""The trainer's one entry point for a training update: train, then probe the candidate.

``train_and_probe`` runs the update (``trainer.update.run_update`` in this process, or
``trainer.distributed.run_update_launched`` on several) and then the probe gate's measurement
on the model it has in memory: the candidate with its adapter on, the live version with the
update's initial LoRA weights (a copy kept before training) swapped back in, the base with the
adapter off. The
model is loaded once per update (once more after a launched update, whose ranks are other
processes), never once per probe. Deciding pass or fail stays with the caller
(``trainer.gate.gate_decision``), so the criteria can change without touching this.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from peft import set_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoTokenizer

from trainer.batch import Sample
from trainer.config import UpdateConfig
from trainer.distributed import Launcher, run_update_launched
from trainer.gpu_memory import gpu_budget
from trainer.memory_gap import memory_gaps
from trainer.multi_person import PersonJob, run_updates
from trainer.policy import load_policy, lora_snapshot, pick_device, release_memory
from trainer.probes import PROBE_PROMPTS, PROBE_TEXT
from trainer.probing import HELD_BACK_TOKENS, probe_model
from trainer.update import run_update


def train_and_probe(
    config: UpdateConfig,
    samples: list[Sample],
    *,
    base_model_dir: str | Path,
    init_adapter_dir: str | Path | None,
    out_adapter_dir: str | Path,
    processes: int = 1,
    launcher: Launcher = "accelerate",
    device: str | torch.device | None = None,
    probe_prompts: Sequence[str] = PROBE_PROMPTS,
    probe_text: str = PROBE_TEXT,
    max_new_tokens: int = 24,
    holdout: Sequence[Sample] = (),
    fresh: Sequence[Sample] = (),
    base_probe: dict[str, float] | None = None,
    memories: Sequence[str] = (),
    memory_form: str = "appended",
) -> Iterator[dict[str, Any]]:
    """Yield each step's metrics, then the summary (``"done": True``) with two more keys:
    ``"probe"`` (the candidate's probe figures, ``trainer.probing.probe_model``) and
    ``"base_probe"`` (the base's, measured on the same weights in the same precision), plus
    ``"gate_seconds"``. ``holdout``: judged samples outside this update (trained into earlier
    versions, or ready beyond the batch); ``fresh``: the newest judged samples, held back from
    every version so far. Both are scored; ``trainer.gate.gate_decision`` holds the candidate
    to the fresh ones, and to the others only where there are none. ``base_probe``: the base's
    probe figures when already measured (``trainer.probing.probe_model``). ``memories``: the
    person's memories this update distilled; the summary's ``"memory_gaps"`` says how far the
    candidate still needs each in its prompt (``trainer.memory_gap``)."""
    dev = pick_device(device)
    summary: dict[str, Any] = {}
    if processes > 1:
        for metrics in run_update_launched(
            config,
            samples,
            base_model_dir=base_model_dir,
            init_adapter_dir=init_adapter_dir,
            out_adapter_dir=out_adapter_dir,
            processes=processes,
            launcher=launcher,
        ):
            if metrics.get("done"):
                summary = metrics
            else:
                yield metrics
        gpu_budget(base_model_dir, config, dev)
        model, live_weights = _candidate_model(
            base_model_dir, config, init_adapter_dir, out_adapter_dir, dev
        )
    else:
        longest = max(
            (len(s.prompt_token_ids) + len(s.response_token_ids) for s in samples), default=0
        )
        # the gate answers the held-back prompts too (trainer.probing.HELD_BACK_TOKENS each)
        longest = max(
            [longest, *(len(s.prompt_token_ids) + HELD_BACK_TOKENS for s in [*holdout, *fresh])]
        )
        budget = gpu_budget(base_model_dir, config, dev, longest_sequence=longest)
        model = load_policy(base_model_dir, config, init_adapter_dir=init_adapter_dir, device=dev)
        live_weights = lora_snapshot(model)
        for metrics in run_update(
            config,
            samples,
            base_model_dir=base_model_dir,
            init_adapter_dir=init_adapter_dir,
            out_adapter_dir=out_adapter_dir,
            device=dev,
            model=model,
        ):
            if metrics.get("done"):
                summary = metrics
            else:
                yield metrics
        summary["memory_budget"] = budget.as_dict() if budget is not None else None
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(base_model_dir))
    probed = _probed(
        model,
        live_weights,
        tokenizer,
        started=started,
        probe_prompts=probe_prompts,
        probe_text=probe_text,
        max_new_tokens=max_new_tokens,
        holdout=holdout,
        fresh=fresh,
        base_probe=base_probe,
    )
    if memories:
        probed["memory_gaps"] = memory_gaps(model, tokenizer, memories, form=memory_form)
        probed["gate_seconds"] = time.perf_counter() - started
    del model, live_weights
    release_memory(dev)
    yield {**summary, **probed}


def _candidate_model(
    base_model_dir: str | Path,
    config: UpdateConfig,
    init_adapter_dir: str | Path | None,
    out_adapter_dir: str | Path,
    dev: torch.device,
) -> tuple[Any, dict[str, Any]]:
    """The policy loaded with the live adapter, its weights kept, then the candidate's put in."""
    model = load_policy(base_model_dir, config, init_adapter_dir=init_adapter_dir, device=dev)
    live_weights = lora_snapshot(model)
    candidate_state = load_file(str(Path(out_adapter_dir) / "adapter_model.safetensors"))
    set_peft_model_state_dict(model, candidate_state)
    return model, live_weights


def _probed(
    model: Any,
    live_weights: dict[str, Any],
    tokenizer: Any,
    *,
    started: float,
    probe_prompts: Sequence[str],
    probe_text: str,
    max_new_tokens: int,
    holdout: Sequence[Sample],
    fresh: Sequence[Sample],
    base_probe: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The probe figures of the candidate in ``model`` and of the base, and the gate's seconds
    since ``started``."""
    candidate, base = probe_model(
        model,
        tokenizer,
        probe_prompts,
        probe_text,
        max_new_tokens=max_new_tokens,
        live_weights=live_weights,
        holdout=holdout,
        fresh=fresh,
        base_probe=base_probe,
    )
    return {"probe": candidate, "base_probe": base, "gate_seconds": time.perf_counter() - started}


def train_and_probe_together(
    jobs: Sequence[PersonJob],
    *,
    base_model_dir: str | Path,
    device: str | torch.device | None = None,
    probe_prompts: Sequence[str] = PROBE_PROMPTS,
    probe_text: str = PROBE_TEXT,
    max_new_tokens: int = 24,
    holdouts: Sequence[Sequence[Sample]] = (),
    freshes: Sequence[Sequence[Sample]] = (),
    base_probe: dict[str, float] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Several people's updates in one stacked run (``trainer.multi_person.run_updates``), then
    each candidate probed as ``train_and_probe`` probes one: yield (job index, metrics), each
    job's summary last with its ``"probe"``, ``"base_probe"`` and ``"gate_seconds"``.
    ``holdouts`` / ``freshes``: each job's held-back samples, as ``train_and_probe`` takes."""
    dev = pick_device(device)
    summaries: dict[int, dict[str, Any]] = {}
    for index, metrics in run_updates(jobs, base_model_dir=base_model_dir, device=dev):
        if metrics.get("done"):
            summaries[index] = metrics
        else:
            yield index, metrics
    tokenizer = AutoTokenizer.from_pretrained(str(base_model_dir))
    for index, job in enumerate(jobs):
        started = time.perf_counter()
        model, live_weights = _candidate_model(
            base_model_dir, job.config, job.init_adapter_dir, job.out_adapter_dir, dev
        )
        probed = _probed(
            model,
            live_weights,
            tokenizer,
            started=started,
            probe_prompts=probe_prompts,
            probe_text=probe_text,
            max_new_tokens=max_new_tokens,
            holdout=holdouts[index] if holdouts else (),
            fresh=freshes[index] if freshes else (),
            base_probe=base_probe,
        )
        del model, live_weights
        release_memory(dev)
        yield index, {**summaries[index], **probed}
