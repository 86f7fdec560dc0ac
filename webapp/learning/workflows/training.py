"""Training: ready samples → one TrainingUpdate → a gated candidate → published when it passes.

``train_update`` is lock → claim → train and gate → finish → publish. The trainer itself (torch,
the probe gate) sits behind one callable, ``TrainRun``: the train task passes the real one
(``trainer_run.train_and_gate``), tests pass a fake that writes an adapter folder.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

from webapp.core.outbox import Task, enqueue
from webapp.learning import training
from webapp.learning.models import PolicyVersion
from webapp.learning.workflows.publishing import AdapterPush, policy_version_publish


class TrainingBusy(RuntimeError):
    """Another update holds the training lock; try again once it finishes."""


@dataclass(frozen=True)
class TrainJob:
    """Everything one update trains on and is gated against, without the ORM."""

    config: dict[str, Any]
    samples: list[training.SampleRow]
    base_model_dir: Path
    init_adapter_dir: str | None
    out_dir: Path
    processes: int
    base_probe: dict[str, float] | None
    """The base model's probe figures when already measured (kept on version 0)."""
    gate_max_kl: float
    gate_max_ppl_ratio: float
    holdout: Sequence[training.SampleRow] = ()
    """Judged samples outside this update: trained into earlier versions, or ready beyond the
    batch (``trainer.gate``)."""
    fresh: Sequence[training.SampleRow] = ()
    """The newest judged samples, held back from this update: the candidate must not score
    worse on them than live; ``holdout`` decides only where there are none."""
    gate_max_feedback_drop: float = 0.0
    gate_max_degenerate_extra: int = 0
    gate_max_repeating_extra: int | None = None


@dataclass(frozen=True)
class TrainResult:
    summary: dict[str, Any]
    probe: dict[str, float]
    base_probe: dict[str, float]
    passed: bool
    reasons: list[str]


class TrainRun(Protocol):
    """Train the adapter (yielding each step's metrics to ``record_step``), then gate it."""

    def __call__(
        self, job: TrainJob, *, record_step: Callable[[dict[str, Any]], None]
    ) -> TrainResult: ...


def maybe_train() -> int | None:
    """Queue an update if enough samples are ready; its id, or None."""
    update = training.training_update_maybe_queue()
    return update.pk if update else None


def train_update(update_id: int, *, run: TrainRun, push: AdapterPush | None = None) -> int | None:
    """Train, gate and publish one update; the new version number (None: nothing to do).

    Raises TrainingBusy while another update holds the lock. Run twice (a redelivered task),
    it trains nothing again and only publishes a version the first run left unpublished.
    """
    with training.training_lock() as acquired:
        if not acquired:
            raise TrainingBusy(f"update {update_id} waits for the training lock")
        update = training.training_update_claim(update_id=update_id)
        if update is None:  # already finished: publish what it left, if anything
            leftover = training.training_update_unpublished(update_id=update_id)
            if leftover is None:
                return None
            return policy_version_publish(version=leftover, push=push).number
        try:
            live = update.base_version
            job = TrainJob(
                config=update.config,
                samples=training.batch_for_update(update=update),
                base_model_dir=Path(settings.BASE_MODEL_DIR),
                init_adapter_dir=(
                    live.adapter_path if live and live.number and live.adapter_path else None
                ),
                out_dir=Path(settings.ADAPTERS_DIR) / f"update-{update.pk}",
                processes=settings.TRAIN_PROCESSES,
                base_probe=training.base_probe_cached(),
                gate_max_kl=settings.GATE_MAX_KL,
                gate_max_ppl_ratio=settings.GATE_MAX_PPL_RATIO,
                holdout=training.holdout_for_update(update=update),
                fresh=training.fresh_for_update(update=update),
                gate_max_feedback_drop=settings.GATE_MAX_FEEDBACK_DROP,
                gate_max_degenerate_extra=settings.GATE_MAX_DEGENERATE_EXTRA,
                gate_max_repeating_extra=settings.GATE_MAX_REPEATING_EXTRA,
            )
            started = time.monotonic()
            result = run(
                job,
                record_step=lambda metrics: training.training_update_record_step(
                    update=update, metrics=metrics
                ),
            )
            if job.base_probe is None:
                training.base_probe_store(probe=result.base_probe)
            version = training.training_update_finish(
                update=update,
                summary={**result.summary, "train_seconds": time.monotonic() - started},
                adapter_dir=job.out_dir,
                probe=result.probe,
                passed=result.passed,
                reasons=result.reasons,
            )
        except Exception:
            training.training_update_fail(update_id=update_id, error=traceback.format_exc())
            raise
    # The version's status, not the gate's verdict: finishing also rejects a candidate whose
    # samples an owner deleted while it trained.
    if version.status == PolicyVersion.Status.CANDIDATE:
        policy_version_publish(version=version, push=push)
    enqueue(Task.MAYBE_TRAIN)  # more samples may have arrived while this one trained
    return version.number
