"""One optimizer step for several people, their rows scored together.

Every person's micro-batches (``trainer.update.prepare_inputs`` made them, as for their own
update) are packed, whole, into passes of at most ``max_tokens`` padded tokens, narrowest first,
one person's rows kept together; each pass is one forward pass with each row through its own
person's adapter (``StackedPolicy.rows``), each micro-batch's loss on its own rows' log-probs
(``trainer.update_step``), and one backward pass for the sum. A micro-batch is never split:
its loss is a token-mean over its rows, as in ``run_update``. The anchor paragraphs go through
each person's adapter, several people per pass, as many as keep the positions scored over the
whole vocabulary within ``LOGIT_CHUNK_TOKENS`` (what one pass's logits may hold). Then each
person's own clipping and AdamW step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from trainer.anchor import next_token_logprobs
from trainer.batch import Batch, concat_batches
from trainer.config import UpdateConfig
from trainer.policy import LOGIT_CHUNK_TOKENS
from trainer.policy_gradient import Chunk, batch_logprobs
from trainer.ranks import World
from trainer.stacked_lora import StackedPolicy
from trainer.update import UpdateInputs, UpdatePlan
from trainer.update_step import (
    anchor_loss,
    new_totals,
    optimizer_step,
    pg_chunk_loss,
    sft_batch_loss,
)


@dataclass
class PersonState:
    """One person's state over the update."""

    index: int
    config: UpdateConfig
    out_adapter_dir: str | Path
    plan: UpdatePlan
    inputs: UpdateInputs
    params: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    continued: bool
    totals: dict[str, float] = field(default_factory=new_totals)
    last: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Segment:
    """Rows of one person scored in a shared pass, and the loss their log-probs give."""

    person: int
    batch: Batch
    loss: Callable[[Tensor], Tensor]


def stacked_step(
    model: StackedPolicy, people: list[PersonState], *, step: int, max_tokens: int, pad_id: int
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


def _pg_segment(person: PersonState, chunk: Chunk, step: int) -> _Segment:
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


def _sft_segment(person: PersonState, batch: Batch) -> _Segment:
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


def _anchor_groups(people: list[PersonState]) -> list[list[PersonState]]:
    """People whose anchor passes run together: as many as keep the positions scored over
    the whole vocabulary within ``LOGIT_CHUNK_TOKENS``, at least one."""
    if not people:
        return []
    assert people[0].inputs.anchor is not None
    positions = max(int(people[0].inputs.anchor[2].shape[0]), 1)
    size = max(LOGIT_CHUNK_TOKENS // positions, 1)
    return [people[i : i + size] for i in range(0, len(people), size)]


def _anchor_together(model: StackedPolicy, group: list[PersonState]) -> None:
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
