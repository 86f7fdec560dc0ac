"""Several people's updates at once: one forward and backward pass over all their rows.

``run_update`` trains one person's adapter; ``run_updates`` trains K people's on one device,
each as ``run_update`` would have trained it alone. The base model is loaded once and carries
every person's adapter (``trainer.stacked_lora.StackedPolicy``); each row of a pass goes
through its own person's adapter, so each person's gradient comes from their own rows only.

Per person, ``run_update``'s code: the plan (reward advantages, micro-batches:
``trainer.update.plan_update``) and the fixed inputs (teacher and reference log-probs:
``prepare_inputs``) with every row through their adapter; their own AdamW continued from the
``optimizer.pt`` beside their initial adapter, at their own learning rate; their own loss
terms, gradient clipping, step and metrics (``trainer.update_step``). Shared: the base model's
weights, its log-probs on the anchor paragraphs (the same for everyone), and the hint
refinement's greedy decoding, one batch for every person's hinted prompts (each through its
own teacher: the base, or that person's adapter). Each step scores every person's rows in a few
shared passes (``trainer.stacked_step``).

The result equals K ``run_update`` calls up to float rounding (tests/trainer/test_multi_person.py
checks adapters and optimizer states; a refinement decoded in a larger batch could in principle
pick another token at an exact tie). Not stacked: LoRA dropout (a row's draw could not match),
several processes (``trainer.distributed``), and the probe gate, which the caller runs per
adapter.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from trainer.algorithms import algorithm_get
from trainer.batch import Sample
from trainer.config import UpdateConfig
from trainer.generation import eos_token_ids
from trainer.gpu_memory import MemoryBudget, gpu_budget
from trainer.optimizer_state import optimizer_state_load, optimizer_steps
from trainer.policy import (
    max_serving_lora_rank,
    peak_memory,
    pick_device,
    release_memory,
    resolve_base_dtype,
    uses_gradient_checkpointing,
)
from trainer.ranks import World
from trainer.refine import Refinement, needs_refinement, refine_with_hints
from trainer.stacked_lora import (
    PersonLora,
    StackedPolicy,
    check_plain_lora,
    load_person_lora,
    new_person_lora,
)
from trainer.stacked_step import PersonState, stacked_step
from trainer.update import (
    Anchor,
    anchor_reference,
    plan_update,
    prepare_inputs,
    sample_length,
    update_summary,
)
from trainer.update_step import save_optimizer_state

CPU_PASS_TOKENS = 2048
"""Padded tokens per shared pass on the CPU: there a pass of 1-2k tokens measured the fastest
per token (SmolLM2-135M, 2 cores: 3.7 ms/token at 2,048 against 4.5 at 4,096 and 5.1 at 512),
since larger ones spill the activations out of the caches. On a GPU a pass takes as many as the
configs' ``micro_batch_tokens`` allow."""


@dataclass(frozen=True)
class PersonJob:
    """One person's update: what ``run_update`` takes for them."""

    config: UpdateConfig
    samples: list[Sample]
    init_adapter_dir: str | Path | None
    """Their live adapter (its ``optimizer.pt`` continues), or None for a new one."""
    out_adapter_dir: str | Path


def run_updates(
    jobs: Sequence[PersonJob],
    *,
    base_model_dir: str | Path,
    device: str | torch.device | None = None,
    micro_batch_tokens: int | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Train every job's adapter; yield (job index, metrics) as ``run_update`` yields them.

    Each step yields every person's step metrics once the stacked step is done (``seconds`` is
    the whole stacked step's); after the last step each adapter and its optimizer state are
    written to the job's ``out_adapter_dir`` and each person's summary (``"done": True``) is
    yielded. ``micro_batch_tokens``: padded tokens per pass, by default the largest of the
    jobs' configs. The jobs must agree on how the base runs (``base_dtype``,
    ``gradient_checkpointing``); their learning rates, losses and steps may differ.
    """
    if not jobs:
        return
    started = time.perf_counter()
    first = jobs[0].config
    _check_jobs(jobs)
    dev = pick_device(device)
    max_tokens = micro_batch_tokens or max(job.config.micro_batch_tokens for job in jobs)
    if micro_batch_tokens is None and dev.type == "cpu":
        max_tokens = min(max_tokens, CPU_PASS_TOKENS)
    base = AutoModelForCausalLM.from_pretrained(
        str(base_model_dir), dtype=resolve_base_dtype(first, dev)
    )
    base.config.use_cache = False
    loras = _person_loras(jobs, base)
    longest = max((sample_length(s) for job in jobs for s in job.samples), default=0)
    # Each person's adapter and AdamW state count once: as one adapter of their ranks' sum.
    total_rank = sum(int(lora.config.r) for lora in loras)
    stacked = dataclasses.replace(first, lora_rank=total_rank, micro_batch_tokens=max_tokens)
    budget = gpu_budget(base_model_dir, stacked, dev, longest_sequence=longest)
    if uses_gradient_checkpointing(first, dev):
        # As trainer.policy.policy_from_base: frozen embeddings need non-reentrant checkpoints.
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = StackedPolicy(base.to(dev), loras)
    del loras
    pad_id = model.config.pad_token_id or 0
    anchored = [job.config for job in jobs if job.config.anchor_coef > 0]
    anchor = anchor_reference(model, anchored[0], base_model_dir, pad_id) if anchored else None
    refinements = _refine_together(model, jobs, pad_id)
    people = [
        _prepare(model, k, job, refinement, anchor, pad_id)
        for k, (job, refinement) in enumerate(zip(jobs, refinements, strict=True))
    ]
    setup_seconds = time.perf_counter() - started
    for step in range(max(job.config.steps_per_batch for job in jobs)):
        active = [p for p in people if step < p.config.steps_per_batch]
        stacked_step(model, active, step=step, max_tokens=max_tokens, pad_id=pad_id)
        for person in active:
            yield person.index, person.last
    for person in people:
        model.save_person(person.index, person.out_adapter_dir)
        save_optimizer_state(person.optimizer, person.out_adapter_dir)
    summaries = [_summary(p, budget, setup_seconds, len(people)) for p in people]
    metrics_peak = peak_memory(dev)
    # As run_update does: an idle worker holding its peak starves vLLM on a shared GPU.
    del people, model
    release_memory(dev)
    seconds = time.perf_counter() - started
    for index, summary in enumerate(summaries):
        yield index, {**summary, "seconds": seconds, **metrics_peak}


def _check_jobs(jobs: Sequence[PersonJob]) -> None:
    first = jobs[0].config
    for job in jobs:
        if job.config.lora_dropout > 0:
            raise ValueError("LoRA dropout cannot be stacked: run_update each such person")
        for name in ("base_dtype", "gradient_checkpointing"):
            if getattr(job.config, name) != getattr(first, name):
                raise ValueError(f"stacked jobs must agree on {name}")


def _person_loras(jobs: Sequence[PersonJob], base: PreTrainedModel) -> list[PersonLora]:
    """Each job's initial adapter: their saved one, or a new one as ``load_policy`` makes it
    (made once per seed and shape: new adapters from the same seed are equal)."""
    new: dict[tuple[Any, ...], PersonLora] = {}
    loras = []
    for k, job in enumerate(jobs):
        config = job.config
        if job.init_adapter_dir is not None:
            lora = load_person_lora(job.init_adapter_dir)
        else:
            key = (config.seed, config.lora_rank, config.lora_alpha, config.target_modules)
            if key not in new:
                new[key] = new_person_lora(base, config)
            lora = new[key]
        check_plain_lora(lora, f"job {k}")
        if int(lora.config.r) > max_serving_lora_rank():
            raise ValueError(
                f"job {k}: LoRA rank {lora.config.r} exceeds serving's "
                f"VLLM_MAX_LORA_RANK={max_serving_lora_rank()}"
            )
        loras.append(lora)
    return loras


def _refine_together(
    model: StackedPolicy, jobs: Sequence[PersonJob], pad_id: int
) -> list[Refinement]:
    """Every person's hint refinement (``trainer.refine``) with as few greedy batches as their
    configs allow: one per teacher and answer length, each prompt through its own person's
    teacher. A person's ``seconds`` is their batch's, which they share."""
    batches: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for k, job in enumerate(jobs):
        config = job.config
        if algorithm_get(config.algorithm).uses_hint and config.refine_max_tokens > 0:
            key = (config.teacher, config.refine_max_tokens)
            hinted = [(k, i) for i, s in enumerate(job.samples) if needs_refinement(s)]
            if hinted:  # a person with nothing to refine opens no batch
                batches.setdefault(key, []).extend(hinted)
    samples = [list(job.samples) for job in jobs]
    refined, seconds = [0] * len(jobs), [0.0] * len(jobs)
    for members in batches.values():
        started = time.perf_counter()
        config = jobs[members[0][0]].config
        prompts = [jobs[k].samples[i] for k, i in members]
        with model.rows([k for k, _ in members]):
            answers, _ = refine_with_hints(
                model, prompts, config, eos_ids=eos_token_ids(model), pad_id=pad_id
            )
        for (k, i), answer in zip(members, answers, strict=True):
            samples[k][i] = answer
            refined[k] += answer.correction_token_ids is not None
            seconds[k] = time.perf_counter() - started
    return [Refinement(samples[k], refined[k], seconds[k]) for k in range(len(jobs))]


def _prepare(
    model: StackedPolicy,
    k: int,
    job: PersonJob,
    refinement: Refinement,
    anchor: Anchor | None,
    pad_id: int,
) -> PersonState:
    """Person k's plan and fixed inputs, with every row through their adapter, and their
    AdamW, continued from their initial adapter's state as ``run_update`` continues it."""
    config = job.config
    with model.person(k):
        plan = plan_update(model, config, job.samples, pad_id=pad_id, refinement=refinement)
        own_anchor = anchor if config.anchor_coef > 0 else None
        inputs = prepare_inputs(model, config, plan, World(), pad_id=pad_id, anchor=own_anchor)
    params = model.person_parameters(k)
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    continued = optimizer_state_load(optimizer, job.init_adapter_dir, lr=config.lr)
    return PersonState(k, config, job.out_adapter_dir, plan, inputs, params, optimizer, continued)


def _summary(
    person: PersonState, budget: MemoryBudget | None, setup_seconds: float, people: int
) -> dict[str, Any]:
    return {
        **update_summary(
            person.config,
            person.plan,
            person.out_adapter_dir,
            last_loss=person.last["loss"],
            budget=budget,
            optimizer_continued=person.continued,
            optimizer_steps=optimizer_steps(person.optimizer),
        ),
        "processes": 1,
        "people": people,
        "setup_seconds": setup_seconds,
        **person.inputs.gap,
    }
