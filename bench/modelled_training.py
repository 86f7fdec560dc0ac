"""A train worker whose updates take a modelled time instead of training: the scale benchmark's
(``bench.many_users``) stand-in for the GPU it does not have.

    python -m celery -A bench.modelled_training worker -Q train ...

Everything but the trainer is Parley's own: the Celery app and its ``train_update`` task, the
per-lineage lock, the claim, the stacked runs' grouping, the finish and the publish into the
serving replicas. Only the two trainer runs are replaced: ``train_and_gate`` by a run that
sleeps ``PARLEY_BENCH_UPDATE_S`` seconds (an update plus its gate, time-compressed), writes an
adapter folder and passes the gate; ``train_and_gate_together`` by one that sleeps that long
for the first person and ``PARLEY_BENCH_EXTRA_PERSON`` × that for each other (1: a stacked run
saves nothing, as when the gate, which probes each person apart, takes most of the time).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from celery.signals import worker_process_init

from webapp.celery import app

__all__ = ["app", "modelled_together", "modelled_update"]


def _update_s() -> float:
    return float(os.environ.get("PARLEY_BENCH_UPDATE_S", "0.5"))


def _first_update_s() -> float:
    """A lineage's first update (no adapter to start from): ``PARLEY_BENCH_FIRST_UPDATE_S``,
    else the same as any other."""
    return float(os.environ.get("PARLEY_BENCH_FIRST_UPDATE_S") or _update_s())


def modelled_update(job: Any, *, record_step: Callable[[dict[str, Any]], None]) -> Any:
    """Take the modelled time of one update and its gate (a ``TrainRun``); an adapter folder
    that passes."""
    time.sleep(_first_update_s() if job.init_adapter_dir is None else _update_s())
    return _passed(job, record_step)


def modelled_together(jobs: Any, *, record_step: Callable[[int, dict[str, Any]], None]) -> Any:
    """Take the modelled time of a stacked run of ``jobs`` (a ``TrainTogether``)."""
    extra = float(os.environ.get("PARLEY_BENCH_EXTRA_PERSON", "1.0"))
    time.sleep(_update_s() * (1 + extra * (len(jobs) - 1)))
    return [_passed(job, lambda m, i=i: record_step(i, m)) for i, job in enumerate(jobs)]


def _passed(job: Any, record_step: Callable[[dict[str, Any]], None]) -> Any:
    from webapp.learning.workflows import training

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
    from webapp.learning.workflows import together, training

    training.train_and_gate = modelled_update
    together.train_and_gate_together = modelled_together
