"""A train worker whose updates take a modelled time instead of training: the scale benchmark's
(``bench.many_users``) stand-in for the GPU it does not have.

    python -m celery -A bench.modelled_training worker -Q train ...

Everything but the trainer is Parley's own: the Celery app and its ``train_update`` task, the
per-lineage lock, the claim, the finish and the publish into the serving replicas. Only
``train_and_gate`` is replaced, by a run that sleeps ``PARLEY_BENCH_UPDATE_S`` seconds (an
update plus its gate, time-compressed), writes an adapter folder and passes the gate.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from celery.signals import worker_process_init

from webapp.celery import app

__all__ = ["app", "modelled_update"]


def modelled_update(job: Any, *, record_step: Callable[[dict[str, Any]], None]) -> Any:
    """Take the modelled time of one update and its gate (a ``TrainRun``); an adapter folder
    that passes."""
    from webapp.learning.workflows import training

    time.sleep(float(os.environ.get("PARLEY_BENCH_UPDATE_S", "0.5")))
    job.out_dir.mkdir(parents=True, exist_ok=True)
    (job.out_dir / "adapter_config.json").write_text("{}")
    record_step({"step": 0, "samples": len(job.samples)})
    return training.TrainResult(
        summary={"samples": len(job.samples), "modelled": True},
        probe={"probe_kl": 0.0, "probe_ppl": 1.0},
        base_probe={"probe_ppl": 1.0},
        passed=True,
        reasons=[],
    )


@worker_process_init.connect
def _replace_the_trainer(**_: Any) -> None:
    """In each worker process, once Django is set up: the task looks the run up when it runs."""
    from webapp.learning.workflows import training

    training.train_and_gate = modelled_update
