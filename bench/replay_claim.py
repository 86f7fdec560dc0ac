"""The webapp's claim rules (``trainer.claim``) over the replay's samples, which live in
memory: each ``trainer.batch.Sample`` keyed by identity, and what the claim leaves ready."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer.claim import Candidate, holdout_choice, is_signed


def candidate(sample: Any) -> Candidate:
    """A trainer ``Sample`` as the claim rules see it (keyed by identity: samples are kept in
    memory, never stored)."""
    signed = is_signed(reward=sample.reward, correction=sample.correction_token_ids)
    return Candidate(
        key=id(sample), signed=signed, signal=signed or bool(sample.hint), group=sample.group_id
    )


def held_back(on_record: list[Any], limit: int, *, live_batch: Sequence[Any] = ()) -> list[Any]:
    """``trainer.claim.holdout_choice`` over the samples on record: here the batch is every
    sample still waiting, so those are the most recent the earlier versions trained on (or that
    wait for an algorithm that uses them: ``opd`` leaves a 👍 alone ready), newest first.

    >>> from trainer.batch import Sample
    >>> signed = [Sample([1], [n], [-1.0], reward=1.0) for n in range(3)]
    >>> [s.response_token_ids for s in held_back([*signed, Sample([1], [9], [-1.0])], 2)]
    [[2], [1]]
    """
    by_key = {id(s): s for s in on_record}
    exclude = {id(s) for s in live_batch}
    keys = holdout_choice([candidate(s) for s in on_record], exclude=exclude, limit=limit)
    return [by_key[key] for key in keys]


def unused_by(algorithm: Any, sample: Any) -> bool:
    """Whether the webapp's claim leaves this sample ready under the algorithm: its kind as
    ``webapp.learning.services`` stores it (a hint or correction without a reward is "opd"; a
    memory's distillation is "memory", which every algorithm trains), asked of
    ``Algorithm.unused_reason``."""
    has_hint, has_correction = bool(sample.hint), bool(sample.correction_token_ids)
    kind = "opd" if not sample.reward and (has_hint or has_correction) else "rl"
    if sample.distils_context:
        kind = "memory"
    return bool(
        algorithm.unused_reason(kind=kind, has_hint=has_hint, has_correction=has_correction)
    )
