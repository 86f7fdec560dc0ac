"""Several people's updates in one stacked run: the real ``TrainTogether`` of
``workflows.training.train_update`` (``PARLEY_TRAIN_PEOPLE_PER_STEP``).

Like ``training.train_and_gate`` for one update, it imports torch and transformers only when it
runs, so the web and judge processes never load them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from webapp.learning.workflows import training


def train_and_gate_together(
    jobs: Sequence[training.TrainJob], *, record_step: Callable[[int, dict[str, Any]], None]
) -> list[training.TrainResult]:
    """The real ``TrainTogether``: every job's rows as trainer samples →
    ``trainer.pipeline.train_and_probe_together`` (one stacked run, then each candidate's
    probe) → each one's gate decision."""
    from transformers import AutoTokenizer  # the train worker's alone: see the module doc

    from trainer.batch import trainer_sample
    from trainer.config import config_from_dict
    from trainer.multi_person import PersonJob
    from trainer.pipeline import train_and_probe_together
    from trainer.threads import torch_threads

    base_model_dir = jobs[0].base_model_dir
    tokenizer = AutoTokenizer.from_pretrained(str(base_model_dir))

    def samples(rows: Sequence[training.SampleRow]) -> list[Any]:
        return [trainer_sample(tokenizer, **vars(row)) for row in rows]

    people = [
        PersonJob(
            config=config_from_dict(job.config),
            samples=samples(job.samples),
            init_adapter_dir=job.init_adapter_dir,
            out_adapter_dir=job.out_dir,
        )
        for job in jobs
    ]
    summaries: dict[int, dict[str, Any]] = {}
    with torch_threads(jobs[0].threads):
        for index, metrics in train_and_probe_together(
            people,
            base_model_dir=base_model_dir,
            holdouts=[samples(job.holdout) for job in jobs],
            freshes=[samples(job.fresh) for job in jobs],
            base_probe=jobs[0].base_probe,
        ):
            if metrics.get("done"):
                summaries[index] = {**metrics, "threads": jobs[0].threads}
            else:
                record_step(index, metrics)
    return [training.gated(job, summaries[index]) for index, job in enumerate(jobs)]
