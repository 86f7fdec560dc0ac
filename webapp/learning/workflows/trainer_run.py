"""The one adapter between the training workflow and trainer/: train an update, then gate it.

This is the only webapp module that loads torch (the train task imports it on first use, so
web and judge processes never do). It turns stored sample rows into ``trainer.batch.Sample``s
with the base model's tokenizer, runs ``trainer.pipeline.train_and_probe`` (the update, one
process per GPU when several, then the probe figures of the candidate and of the base measured
on the model it holds in memory) and decides the gate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformers import AutoTokenizer

from trainer.batch import Sample, hinted_prompt_ids
from trainer.config import config_from_dict
from trainer.gate import gate_decision
from trainer.pipeline import train_and_probe
from webapp.learning.training import SampleRow
from webapp.learning.workflows.training import TrainJob, TrainResult


def _sample(row: SampleRow, tokenizer: Any) -> Sample:
    correction_ids = None
    if row.correction:
        correction_ids = tokenizer.encode(row.correction, add_special_tokens=False)
        if tokenizer.eos_token_id is not None:
            correction_ids.append(tokenizer.eos_token_id)
    return Sample(
        prompt_token_ids=row.prompt_token_ids,
        response_token_ids=row.response_token_ids,
        sampler_logprobs=row.response_logprobs,
        reward=row.reward,
        hint=row.hint,
        teacher_prompt_token_ids=(
            hinted_prompt_ids(
                tokenizer,
                row.prompt_messages,
                row.hint,
                tools=row.tools,
                served_prompt_ids=row.prompt_token_ids,
            )
            if row.hint
            else None
        ),
        correction_token_ids=correction_ids,
        group_id=row.group_id,
        temperature=row.temperature,
    )


def train_and_gate(job: TrainJob, *, record_step: Callable[[dict[str, Any]], None]) -> TrainResult:
    tokenizer = AutoTokenizer.from_pretrained(str(job.base_model_dir))
    samples = [_sample(row, tokenizer) for row in job.samples]
    config = config_from_dict(job.config)
    dirs = {"base_model_dir": job.base_model_dir, "init_adapter_dir": job.init_adapter_dir}
    steps = train_and_probe(
        config,
        samples,
        out_adapter_dir=job.out_dir,
        processes=job.processes,
        holdout=[_sample(row, tokenizer) for row in job.holdout],
        fresh=[_sample(row, tokenizer) for row in job.fresh],
        **dirs,
    )
    summary: dict[str, Any] = {}
    for metrics in steps:
        if metrics.get("done"):
            summary = metrics
        else:
            record_step(metrics)
    probe, base_probe = summary.pop("probe"), summary.pop("base_probe")
    passed, reasons = gate_decision(
        probe,
        base_probe,
        job.gate_max_kl,
        job.gate_max_ppl_ratio,
        max_feedback_drop=job.gate_max_feedback_drop,
        max_degenerate_extra=job.gate_max_degenerate_extra,
        max_repeating_extra=job.gate_max_repeating_extra,
    )
    return TrainResult(
        summary=summary, probe=probe, base_probe=base_probe, passed=passed, reasons=reasons
    )
