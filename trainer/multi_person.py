"""Several people's updates at once: one forward and backward pass over all their rows.

``run_update`` trains one person's adapter; ``run_updates`` trains K people's on one device,
each as ``run_update`` would have trained it alone. The base model is loaded once and carries
every person's adapter (``trainer.stacked_lora.StackedPolicy``); each row of a pass goes
through its own person's adapter, so each person's gradient comes from their own rows only.

Per person, exactly ``run_update``'s code: the plan (hint refinement, reward advantages,
micro-batches: ``trainer.update.plan_update``) and the fixed inputs (teacher and reference
log-probs: ``prepare_inputs``) with every row through their adapter; their own AdamW continued
from the ``optimizer.pt`` beside their initial adapter, at their own learning rate; their own
loss terms, gradient clipping, step and metrics (``trainer.update_step``). Shared: the base
model's weights and its log-probs on the anchor paragraphs (the same for everyone).

What is stacked is each step's scoring: every person's micro-batches are packed, whole, into
passes of at most ``micro_batch_tokens`` padded tokens (rows of one person kept together), and
each pass runs one forward and one backward over all its people's rows. The anchor paragraphs
go through each person's adapter, several people per pass, as many as keep the vocabulary-wide
log-probs within what one pass's logits may hold (``LOGIT_CHUNK_TOKENS`` positions).

The result equals K ``run_update`` calls up to float rounding (tests/trainer/test_multi_person.py
checks adapters and optimizer states). Not stacked: LoRA dropout (a row's draw could not
match), several processes (``trainer.distributed``), and the probe gate, which the caller runs
per adapter.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import AutoModelForCausalLM, PreTrainedModel

from trainer.anchor import next_token_logprobs
from trainer.batch import Batch, Sample, concat_batches
from trainer.config import UpdateConfig
from trainer.memory import MemoryBudget, gpu_budget
from trainer.optimizer_state import optimizer_state_load, optimizer_steps
from trainer.policy import (
    LOGIT_CHUNK_TOKENS,
    max_serving_lora_rank,
    peak_memory,
    pick_device,
    release_memory,
    resolve_base_dtype,
    uses_gradient_checkpointing,
)
from trainer.policy_gradient import Chunk, batch_logprobs
from trainer.ranks import World
from trainer.stacked_lora import (
    PersonLora,
    StackedPolicy,
    check_plain_lora,
    load_person_lora,
    new_person_lora,
)
from trainer.update import (
    Anchor,
    UpdateInputs,
    UpdatePlan,
    anchor_reference,
    plan_update,
    prepare_inputs,
    sample_length,
    update_summary,
)
from trainer.update_step import (
    anchor_loss,
    new_totals,
    optimizer_step,
    pg_chunk_loss,
    save_optimizer_state,
    sft_batch_loss,
)


@dataclass(frozen=True)
class PersonJob:
    """One person's update: what ``run_update`` takes for them."""

    config: UpdateConfig
    samples: list[Sample]
    init_adapter_dir: str | Path | None
    """Their live adapter (its ``optimizer.pt`` continues), or None for a new one."""
    out_adapter_dir: str | Path


@dataclass
class _Person:
    """One person's state over the update."""

    index: int
    job: PersonJob
    plan: UpdatePlan
    inputs: UpdateInputs
    params: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    continued: bool
    totals: dict[str, float] = field(default_factory=new_totals)
    last: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> UpdateConfig:
        return self.job.config


@dataclass
class _Segment:
    """Rows of one person scored in a shared pass, and the loss their log-probs give."""

    person: int
    batch: Batch
    loss: Callable[[Tensor], Tensor]


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
    people = [_prepare(model, k, job, anchor, pad_id) for k, job in enumerate(jobs)]
    setup_seconds = time.perf_counter() - started
    for step in range(max(job.config.steps_per_batch for job in jobs)):
        active = [p for p in people if step < p.config.steps_per_batch]
        _stacked_step(model, active, step=step, max_tokens=max_tokens, pad_id=pad_id)
        for person in active:
            yield person.index, person.last
    for person in people:
        model.save_person(person.index, person.job.out_adapter_dir)
        save_optimizer_state(person.optimizer, person.job.out_adapter_dir)
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


def _prepare(
    model: StackedPolicy, k: int, job: PersonJob, anchor: Anchor | None, pad_id: int
) -> _Person:
    """Person k's plan and fixed inputs, with every row through their adapter, and their
    AdamW, continued from their initial adapter's state as ``run_update`` continues it."""
    config = job.config
    with model.person(k):
        plan = plan_update(model, config, job.samples, pad_id=pad_id)
        own_anchor = anchor if config.anchor_coef > 0 else None
        inputs = prepare_inputs(model, config, plan, World(), pad_id=pad_id, anchor=own_anchor)
    params = model.person_parameters(k)
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    continued = optimizer_state_load(optimizer, job.init_adapter_dir, lr=config.lr)
    return _Person(k, job, plan, inputs, params, optimizer, continued)


def _stacked_step(
    model: StackedPolicy, people: list[_Person], *, step: int, max_tokens: int, pad_id: int
) -> None:
    """One optimizer step for each person, their rows scored together; fills ``person.last``."""
    started = time.perf_counter()
    model.train()
    for person in people:
        person.optimizer.zero_grad(set_to_none=True)
        person.totals = new_totals()
    segments = [
        *(_pg_segment(person, chunk, step) for person in people for chunk in person.inputs.chunks),
        *(_sft_segment(person, batch) for person in people for batch in person.inputs.sft_batches),
    ]
    for pack in _packs(segments, max_tokens):
        _score_together(model, pack, pad_id)
    anchored = [person for person in people if person.inputs.anchor is not None]
    for group in _anchor_groups(anchored):
        _anchor_together(model, group)
    for person in people:
        person.last = optimizer_step(
            person.config,
            person.optimizer,
            person.params,
            person.totals,
            chunks=person.inputs.chunks,
            gap=person.inputs.gap,
            tokens=int(person.plan.pg_tokens + person.plan.sft_tokens),
            has_anchor=person.inputs.anchor is not None,
            world=World(),
            step=step,
            started=started,
        )


def _pg_segment(person: _Person, chunk: Chunk, step: int) -> _Segment:
    def loss(logp_B_T: Tensor) -> Tensor:
        return pg_chunk_loss(
            person.config,
            chunk,
            logp_B_T,
            person.totals,
            pg_tokens=person.plan.pg_tokens,
            first_step=step == 0,
        )

    return _Segment(person.index, chunk.batch, loss)


def _sft_segment(person: _Person, batch: Batch) -> _Segment:
    def loss(logp_B_T: Tensor) -> Tensor:
        return sft_batch_loss(
            person.config, batch, logp_B_T, person.totals, sft_tokens=person.plan.sft_tokens
        )

    return _Segment(person.index, batch, loss)


def _packs(segments: list[_Segment], max_tokens: int) -> list[list[_Segment]]:
    """Whole segments, narrowest first, into passes of at most ``max_tokens`` padded tokens
    (rows × widest row); a segment over the limit alone still gets a pass of its own. Within a
    pass one person's segments are adjacent, so their rows make one run."""
    packs: list[list[_Segment]] = []
    rows = width = 0
    for segment in sorted(segments, key=lambda s: s.batch.input_ids_B_T.shape[1]):
        seg_rows, seg_width = segment.batch.input_ids_B_T.shape
        wider = max(width, seg_width)
        if packs and (rows + seg_rows) * wider <= max_tokens:
            packs[-1].append(segment)
            rows, width = rows + seg_rows, wider
        else:
            packs.append([segment])
            rows, width = seg_rows, seg_width
    return [sorted(pack, key=lambda s: s.person) for pack in packs]


def _score_together(model: StackedPolicy, pack: list[_Segment], pad_id: int) -> None:
    """One forward pass over the pack's rows, each through its person's adapter; each
    segment's loss on its own rows' log-probs; one backward pass for the sum."""
    batch = concat_batches([segment.batch for segment in pack], pad_id=pad_id)
    persons = [s.person for s in pack for _ in range(s.batch.input_ids_B_T.shape[0])]
    with model.rows(persons):
        logp_B_T = batch_logprobs(model, batch)
        losses, row = [], 0
        for segment in pack:
            rows, width = segment.batch.input_ids_B_T.shape
            losses.append(segment.loss(logp_B_T[row : row + rows, :width]))
            row += rows
        torch.stack(losses).sum().backward()


def _anchor_groups(people: list[_Person]) -> list[list[_Person]]:
    """People whose anchor passes run together: as many as keep the positions scored over
    the whole vocabulary within ``LOGIT_CHUNK_TOKENS``, at least one."""
    if not people:
        return []
    assert people[0].inputs.anchor is not None
    positions = max(int(people[0].inputs.anchor[2].shape[0]), 1)
    size = max(LOGIT_CHUNK_TOKENS // positions, 1)
    return [people[i : i + size] for i in range(0, len(people), size)]


def _anchor_together(model: StackedPolicy, group: list[_Person]) -> None:
    """The anchor paragraphs once per person of the group, in one pass through each one's
    adapter; each person's anchor loss on their own positions; one backward pass."""
    assert group[0].inputs.anchor is not None
    ids_B_T, mask_B_T, base_logp_N_V = group[0].inputs.anchor
    rows = ids_B_T.shape[0]
    persons = [person.index for person in group for _ in range(rows)]
    with model.rows(persons):
        policy_logp_N_V = next_token_logprobs(
            model, ids_B_T.repeat(len(group), 1), mask_B_T.repeat(len(group), 1)
        )
        blocks = policy_logp_N_V.split(base_logp_N_V.shape[0])
        losses = [
            anchor_loss(person.config, base_logp_N_V, block, person.totals)
            for person, block in zip(group, blocks, strict=True)
        ]
        torch.stack(losses).sum().backward()


def _summary(
    person: _Person, budget: MemoryBudget | None, setup_seconds: float, people: int
) -> dict[str, Any]:
    return {
        **update_summary(
            person.config,
            person.plan,
            person.job.out_adapter_dir,
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
