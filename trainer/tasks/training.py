"""Training tasks (queue ``train``, one worker, concurrency 1): run one update on ready
samples, gate the candidate on the probe set, publish it. The loop in trainer.update yields
metrics and this task persists them, so the training code never sees the ORM."""

from __future__ import annotations

import logging
import os
import time
import traceback
from pathlib import Path

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(name="trainer.tasks.training.maybe_train")
def maybe_train() -> int | None:
    """Queue an update if enough samples are ready (called after judging and periodically)."""
    from webapp.learning.training import training_update_maybe_queue

    update = training_update_maybe_queue()
    return update.pk if update else None


@shared_task(
    name="trainer.tasks.training.train_update", bind=True, acks_late=True, max_retries=None
)
def train_update(self, update_id: int) -> int | None:  # noqa: ANN001 - Celery's bound task
    """Train, gate and publish one update; returns the new version number."""
    from django.conf import settings
    from transformers import AutoTokenizer

    from trainer.config import config_from_dict
    from trainer.gate import gate_decision
    from trainer.pipeline import train_and_probe
    from webapp.learning import training

    with training.training_lock() as acquired:
        if not acquired:
            raise self.retry(countdown=15)  # another update holds the lock: wait for it
        update = training.training_update_claim(update_id=update_id)
        if update is None:  # already finished (a redelivered task): publish what it left
            leftover = training.training_update_unpublished(update_id=update_id)
            if leftover is None:
                return None
            training.policy_version_publish(version=leftover)
            return leftover.number
        try:
            base_dir = settings.BASE_MODEL_DIR
            tokenizer = AutoTokenizer.from_pretrained(str(base_dir))
            samples = training.batch_for_update(update=update, tokenizer=tokenizer)
            live = update.base_version
            init_dir = live.adapter_path if live and live.number and live.adapter_path else None
            out_dir = Path(settings.ADAPTERS_DIR) / f"update-{update.pk}"
            started = time.monotonic()
            summary: dict = {}
            config = config_from_dict(update.config)
            dirs = {"base_model_dir": base_dir, "init_adapter_dir": init_dir}
            processes = getattr(
                settings, "TRAIN_PROCESSES", int(os.environ.get("PARLEY_TRAIN_PROCESSES", "1"))
            )
            # Several GPUs: one launched process per GPU, metrics read back from rank 0. The
            # probe gate then measures the model the trainer holds in memory.
            steps = train_and_probe(
                config, samples, out_adapter_dir=out_dir, processes=processes, **dirs
            )
            for metrics in steps:
                if metrics.get("done"):
                    summary = metrics
                else:
                    training.training_update_record_step(update=update, metrics=metrics)
            probe, base_probe = summary.pop("probe"), summary.pop("base_probe")
            _base_probe(base_probe)
            passed, reasons = gate_decision(
                probe, base_probe, settings.GATE_MAX_KL, settings.GATE_MAX_PPL_RATIO
            )
            summary["train_seconds"] = time.monotonic() - started
            version = training.training_update_finish(
                update=update,
                summary=summary,
                adapter_dir=out_dir,
                probe=probe,
                passed=passed,
                reasons=reasons,
            )
        except Exception:
            training.training_update_fail(update_id=update_id, error=traceback.format_exc())
            raise
    if passed:
        training.policy_version_publish(version=version)
    maybe_train.delay()  # more samples may have arrived while this one trained
    return version.number


def _base_probe(measured: dict[str, float]) -> None:
    """Keep the base model's probe figures on version 0 the first time they are measured
    (the dashboard shows them); the gate compares with this update's own base figures."""
    from webapp.learning.models import PolicyVersion

    base = PolicyVersion.objects.get(number=0)
    if not base.probe_metrics.get("probe_ppl"):
        base.probe_metrics = measured
        base.save(update_fields=["probe_metrics"])


@shared_task(name="trainer.tasks.publishing.publish_version")
def publish_version(version_id: int) -> int:
    """Make a version live on every replica (rollback uses this too)."""
    from webapp.learning.models import PolicyVersion
    from webapp.learning.training import policy_version_publish

    return policy_version_publish(version=PolicyVersion.objects.get(pk=version_id)).number
