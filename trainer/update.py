"""One training update: a batch of samples in, metrics out, a new adapter on disk.

``run_update`` is a generator so the caller (the Celery task) can persist each step's metrics
as they come; it never sees a database. The algorithm, in order:

1. Advantages per sample from rewards: GRPO-normalised within groups of two or more siblings,
   else the reward (minus a running baseline when configured).
2. Without gradients: the teacher's log-probs of each hinted sample's response tokens under the
   hinted prompt, the base model's log-probs when a KL penalty is on, and the base model's
   next-token distribution on the anchor paragraphs when the language anchor is on.
3. ``steps_per_batch`` optimizer steps, each one pass over the batch in micro-batches with
   gradients accumulated. Step 0's log-probs are the old policy (the parameters have not moved
   yet), so the old log-probs, the OPD advantages and the trainer–sampler gap cost no extra pass.
4. Save the adapter, free the GPU's cached memory and yield a summary with ``"done": True``.

Micro-batches are sized by padded tokens (``micro_batch_tokens``), since activation memory
grows with tokens; on a GPU the update's memory budget is checked before the model is loaded
(``trainer.gpu_memory``), so a configuration that cannot fit is refused with the arithmetic.

Several processes (``World``, launched by ``trainer.distributed``) compute the same update: each
rank computes the advantages and token counts from all samples, takes every ``world_size``-th
micro-batch, and the LoRA gradients and metric totals are summed across ranks before clipping.
No DDP wrapper: the adapter is tiny, so one all-reduce of its flattened gradients per step is
simpler than hooking every backward pass. Only rank 0 yields metrics and saves the adapter.

The planning (``plan_update``), the fixed inputs (``prepare_inputs``) and everything from the
log-probs on (``trainer.update_step``) are shared with ``trainer.multi_person``, which trains
several people's adapters in one forward and backward pass and must compute the same update.

Simplified on purpose: one full batch per step (no minibatch shuffling), a constant learning
rate and no warm-up — an update is two or three steps, too few for a schedule to matter.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from trainer.advantages import reward_advantages
from trainer.algorithms import algorithm_get
from trainer.anchor import anchor_batch, anchor_token_ids, next_token_logprobs
from trainer.batch import Batch, Sample, collate, micro_batches
from trainer.config import UpdateConfig
from trainer.generation import eos_token_ids
from trainer.gpu_memory import MemoryBudget, gpu_budget
from trainer.optimizer_state import optimizer_state_load, optimizer_steps
from trainer.policy import (
    adapter_disabled,
    load_policy,
    peak_memory,
    pick_device,
    release_memory,
    save_adapter,
    trainable_parameters,
)
from trainer.policy_gradient import Chunk, batch_logprobs, prepare_chunk
from trainer.ranks import World, reduce_across, sum_gradients
from trainer.refine import Refinement, refine_with_hints
from trainer.update_step import (
    anchor_loss,
    new_totals,
    optimizer_step,
    pg_chunk_loss,
    save_optimizer_state,
    sft_batch_loss,
)

Anchor = tuple[Tensor, Tensor, Tensor]
"""The anchor paragraphs (input ids (B, T), mask (B, T)) and the base's log-probs on them (N, V)."""


@dataclass
class UpdatePlan:
    """What one update trains, decided before any gradient: the samples (refined with their
    hints), their reward advantages, and the rows and micro-batches of each loss."""

    samples: list[Sample]
    reward_adv: list[float]
    baseline: float
    pg_rows: list[int]
    sft_rows: list[int]
    pg_micro: list[list[int]]
    sft_micro: list[list[int]]
    refined: int = 0
    refine_seconds: float = 0.0

    @property
    def pg_tokens(self) -> float:
        """Response tokens of the policy-gradient rows, over all ranks: each micro-batch's
        share of the loss is the same whichever rank computes it."""
        return float(sum(len(self.samples[i].response_token_ids) for i in self.pg_rows))

    @property
    def sft_tokens(self) -> float:
        return float(sum(len(self.samples[i].correction_token_ids or []) for i in self.sft_rows))


@dataclass
class UpdateInputs:
    """This rank's share of the plan on the device, with what stays fixed over the steps."""

    chunks: list[Chunk]
    sft_batches: list[Batch]
    anchor: Anchor | None
    gap: dict[str, float] = field(default_factory=dict)


def run_update(
    config: UpdateConfig,
    samples: list[Sample],
    *,
    base_model_dir: str | Path,
    init_adapter_dir: str | Path | None,
    out_adapter_dir: str | Path,
    device: str | torch.device | None = None,
    world: World | None = None,
    model: torch.nn.Module | None = None,
) -> Iterator[dict[str, Any]]:
    """Train the adapter on the samples; yield one metrics dict per step, then a summary.

    With a world of several processes every rank must run this with the same arguments (they
    meet in collectives every step); only rank 0 yields anything and writes the adapter.
    ``model``: a policy the caller loaded with ``load_policy`` (and keeps, to run the probe gate
    on it afterwards: ``trainer.pipeline.train_and_probe``); by default this loads its own.
    """
    world = world or World.current()
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    budget = None
    if model is None:
        longest = max((sample_length(s) for s in samples), default=0)
        budget = gpu_budget(base_model_dir, config, pick_device(device), longest_sequence=longest)
        model = load_policy(
            base_model_dir, config, init_adapter_dir=init_adapter_dir, device=device
        )
    dev = next(model.parameters()).device
    pad_id = model.config.pad_token_id or 0
    plan = plan_update(model, config, samples, pad_id=pad_id)
    anchor = anchor_reference(model, config, base_model_dir, pad_id)
    inputs = prepare_inputs(model, config, plan, world, pad_id=pad_id, anchor=anchor)
    params = trainable_parameters(model)
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    optimizer_continued = optimizer_state_load(optimizer, init_adapter_dir, lr=config.lr)
    setup_seconds = time.perf_counter() - started
    metrics: dict[str, Any] = {}
    for step in range(config.steps_per_batch):
        metrics = _step(model, config, plan, inputs, optimizer, params, world, step=step)
        if world.rank == 0:
            yield metrics
    if world.rank == 0:
        save_adapter(model, out_adapter_dir)
        save_optimizer_state(optimizer, out_adapter_dir)
    steps_taken = optimizer_steps(optimizer)
    metrics_peak = peak_memory(dev)
    # Drop the optimizer state, activations and cached blocks now, not when the worker exits:
    # an idle worker holding its peak starves vLLM of KV cache on a shared GPU.
    gap = inputs.gap
    del optimizer, params, inputs, model
    release_memory(dev)
    if world.rank != 0:
        return
    yield {
        **update_summary(
            config,
            plan,
            out_adapter_dir,
            last_loss=metrics["loss"],
            budget=budget,
            optimizer_continued=optimizer_continued,
            optimizer_steps=steps_taken,
        ),
        "processes": world.world_size,
        "setup_seconds": setup_seconds,
        "seconds": time.perf_counter() - started,
        **gap,
        **metrics_peak,
    }


def update_summary(
    config: UpdateConfig,
    plan: UpdatePlan,
    out_adapter_dir: str | Path,
    *,
    last_loss: float,
    budget: MemoryBudget | None,
    optimizer_continued: bool,
    optimizer_steps: int,
) -> dict[str, Any]:
    """What an update's summary says about one person's update (timing and memory aside)."""
    return {
        "done": True,
        "adapter_dir": str(Path(out_adapter_dir)),
        "steps": config.steps_per_batch,
        "loss": last_loss,
        "samples": len(plan.samples),
        "pg_samples": len(plan.pg_rows),
        "sft_samples": len(plan.sft_rows),
        "refined_samples": plan.refined,
        "refine_seconds": plan.refine_seconds,
        "baseline": plan.baseline,
        "micro_batches": len(plan.pg_micro) + len(plan.sft_micro),
        "memory_budget": budget.as_dict() if budget is not None else None,
        "sampling_temperatures": sorted({s.temperature for s in plan.samples}),
        "optimizer_state": "continued" if optimizer_continued else "new",
        "optimizer_steps": optimizer_steps,
    }


def refine_for_update(
    model: torch.nn.Module, config: UpdateConfig, samples: list[Sample], *, pad_id: int
) -> Refinement:
    """The hinted samples refined (OPD only: hints are its signal, so an RL-only update
    ignores them, refined or not)."""
    if not algorithm_get(config.algorithm).uses_hint:
        return Refinement(samples)
    started = time.perf_counter()
    refined_samples, refined = refine_with_hints(
        model, samples, config, eos_ids=eos_token_ids(model), pad_id=pad_id
    )
    return Refinement(refined_samples, refined, time.perf_counter() - started)


def plan_update(
    model: torch.nn.Module,
    config: UpdateConfig,
    samples: list[Sample],
    *,
    pad_id: int,
    refinement: Refinement | None = None,
) -> UpdatePlan:
    """Refine the hinted samples (``refine_for_update``, unless ``refinement`` is its result
    already), take the reward advantages, and sort the rows of each loss into micro-batches
    sized by padded tokens."""
    algorithm = algorithm_get(config.algorithm)
    use_rl, use_opd = algorithm.uses_reward, algorithm.uses_hint
    refinement = refinement or refine_for_update(model, config, samples, pad_id=pad_id)
    samples = refinement.samples
    reward_adv, baseline = reward_advantages(config, samples)

    def trains_pg(s: Sample) -> bool:
        has_signal = (use_rl and s.reward is not None) or (
            (use_opd or s.distils_context) and s.hint is not None
        )
        return has_signal and len(s.response_token_ids) > 0

    pg_rows = sorted(
        (i for i, s in enumerate(samples) if trains_pg(s)), key=lambda i: sample_length(samples[i])
    )
    sft_rows = sorted(
        (i for i, s in enumerate(samples) if s.correction_token_ids),
        key=lambda i: sample_length(samples[i], correction=True),
    )
    if not pg_rows and not sft_rows:
        raise ValueError("no sample carries a signal this algorithm can train on")
    sizes = {"max_tokens": config.micro_batch_tokens, "max_rows": config.micro_batch_size}
    return UpdatePlan(
        samples=samples,
        reward_adv=reward_adv,
        baseline=baseline,
        pg_rows=pg_rows,
        sft_rows=sft_rows,
        pg_micro=list(
            micro_batches(pg_rows, [sample_length(samples[i]) for i in pg_rows], **sizes)
        ),
        sft_micro=list(
            micro_batches(
                sft_rows, [sample_length(samples[i], correction=True) for i in sft_rows], **sizes
            )
        ),
        refined=refinement.refined,
        refine_seconds=refinement.seconds,
    )


def prepare_inputs(
    model: torch.nn.Module,
    config: UpdateConfig,
    plan: UpdatePlan,
    world: World,
    *,
    pad_id: int,
    anchor: Anchor | None,
) -> UpdateInputs:
    """Without gradients: this rank's micro-batches (every ``world_size``-th), each with its
    teacher and reference log-probs, and the correction batches; ``anchor`` is kept as it is
    (``anchor_reference``, computed once for the base model)."""
    algorithm = algorithm_get(config.algorithm)
    use_rl, use_opd = algorithm.uses_reward, algorithm.uses_hint
    dev = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        chunks = [
            prepare_chunk(
                model,
                config,
                [plan.samples[i] for i in rows],
                [plan.reward_adv[i] for i in rows],
                use_rl=use_rl,
                use_opd=use_opd,
                pad_id=pad_id,
                device=dev,
            )
            for rows in plan.pg_micro[world.rank :: world.world_size]
        ]
    sft_batches = [
        _correction_batch([plan.samples[i] for i in rows], pad_id).to(dev)
        for rows in plan.sft_micro[world.rank :: world.world_size]
    ]
    return UpdateInputs(chunks, sft_batches, anchor)


def _step(
    model: torch.nn.Module,
    config: UpdateConfig,
    plan: UpdatePlan,
    inputs: UpdateInputs,
    optimizer: torch.optim.Optimizer,
    params: list[torch.nn.Parameter],
    world: World,
    *,
    step: int,
) -> dict[str, Any]:
    """One optimizer step over the whole batch, gradients accumulated over the micro-batches
    (and summed across ranks); its metrics."""
    step_started = time.perf_counter()
    dev = next(model.parameters()).device
    model.train()
    optimizer.zero_grad(set_to_none=True)
    totals = new_totals()
    for chunk in inputs.chunks:
        logp_B_T = batch_logprobs(model, chunk.batch)
        pg_chunk_loss(
            config, chunk, logp_B_T, totals, pg_tokens=plan.pg_tokens, first_step=step == 0
        ).backward()
    for batch in inputs.sft_batches:
        logp_B_T = batch_logprobs(model, batch)
        sft_batch_loss(config, batch, logp_B_T, totals, sft_tokens=plan.sft_tokens).backward()
    if inputs.anchor is not None:
        ids_B_T, mask_B_T, base_logp_N_V = inputs.anchor
        policy_logp_N_V = next_token_logprobs(model, ids_B_T, mask_B_T)
        anchor_loss(
            config, base_logp_N_V, policy_logp_N_V, totals, world_size=world.world_size
        ).backward()
    if world.world_size > 1:
        sum_gradients(params)
        totals = dict(zip(totals, reduce_across(list(totals.values()), dev), strict=True))
    return optimizer_step(
        config,
        optimizer,
        params,
        totals,
        chunks=inputs.chunks,
        gap=inputs.gap,
        tokens=int(plan.pg_tokens + plan.sft_tokens),
        has_anchor=inputs.anchor is not None,
        world=world,
        step=step,
        started=step_started,
    )


def sample_length(sample: Sample, *, correction: bool = False) -> int:
    """The sequence length a sample's row has (prompt + response, or prompt + correction)."""
    target = (sample.correction_token_ids or []) if correction else sample.response_token_ids
    return len(sample.prompt_token_ids) + len(target)


def anchor_reference(
    model: torch.nn.Module, config: UpdateConfig, base_model_dir: str | Path, pad_id: int
) -> Anchor | None:
    """The anchor paragraphs and the base model's next-token log-probs on them, or None when
    the config has no anchor. The same for every adapter on this base model."""
    if config.anchor_coef <= 0:
        return None
    device = next(model.parameters()).device
    ids_B_T, mask_B_T = anchor_batch(anchor_token_ids(str(base_model_dir)), pad_id)
    ids_B_T, mask_B_T = ids_B_T.to(device), mask_B_T.to(device)
    model.eval()
    with torch.no_grad(), adapter_disabled(model):
        base_logp_N_V = next_token_logprobs(model, ids_B_T, mask_B_T)
    return ids_B_T, mask_B_T, base_logp_N_V


def _correction_batch(samples: list[Sample], pad_id: int) -> Batch:
    """The prompt followed by the user's corrected answer, trained with the supervised loss."""
    return collate(
        [s.prompt_token_ids for s in samples],
        [list(s.correction_token_ids or []) for s in samples],
        pad_id=pad_id,
    )
