"""Train and gate, the second stage of an update, and the workflow that runs all three.

``train_update`` is lock → claim (``workflows.claiming``) → train and gate (here) → finish and
publish (``workflows.publishing``). The trainer itself (torch, the probe gate) sits behind one
callable, ``TrainRun``: the train task passes the real one (``train_and_gate``), tests pass a
fake that writes an adapter folder. ``train_and_gate`` imports torch and transformers when it
runs, so web and judge processes, which import this module, never load them.

The update runs under a PostgreSQL advisory lock on its lineage, held by the train worker's
connection: never two updates of one lineage at once, while train workers take updates of
other lineages side by side; a worker that dies releases it with its connection. Run twice (a
redelivered task), an update trains nothing again and only publishes the version the first run
left unpublished.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import connection

from trainer.gate import GateThresholds
from trainer.threads import train_threads
from webapp.chat.models import Message
from webapp.core.outbox import Task, enqueue
from webapp.learning.distillation import distilled_memories
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.workflows import claiming, publishing

TRAINING_LOCK_KEY = 0x5041524C  # "PARL": the advisory lock class of single-flight training


class TrainingBusy(RuntimeError):
    """Another update of the same lineage holds its training lock; try again once it finishes."""


def lineage_lock_key(owner_id: int | None) -> int:
    """The second half of a lineage's advisory lock (the shared lineage: 0); PostgreSQL's
    two-key form takes 32-bit integers."""
    return 0 if owner_id is None else 1 + (owner_id - 1) % 0x7FFFFFFE


@contextlib.contextmanager
def training_lock(owner_id: int | None = None) -> Iterator[bool]:
    """A session-level PostgreSQL advisory lock on one lineage; yields whether this worker
    holds it. Updates of other lineages take their own locks and run alongside."""
    key = [TRAINING_LOCK_KEY, lineage_lock_key(owner_id)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", key)
        acquired = bool(cursor.fetchone()[0])
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", key)


@dataclass(frozen=True)
class SampleRow:
    """One Sample as stored: the tokens serving sampled, and the hint and correction as text
    (the trainer tokenises those with the base model's tokenizer)."""

    prompt_messages: list[dict[str, Any]]
    prompt_token_ids: list[int]
    response_token_ids: list[int]
    response_logprobs: list[float]
    reward: float | None
    hint: str | None
    correction: str
    group_id: str | None
    tools: list[dict[str, Any]] | None = None
    """The tools the request offered (they are part of the prompt the template rendered)."""
    temperature: float = 1.0
    """The temperature the answer was sampled at (its log-probs are at this temperature)."""
    memory: str = ""
    """A memory sample's memories as served: the trainer distils them (teacher with, student
    without)."""


def sample_rows(ids: Sequence[int]) -> list[SampleRow]:
    """The samples with these ids that have tokens, in id order."""
    samples = list(Sample.objects.filter(pk__in=list(ids)).select_related("message").order_by("pk"))
    params = _sampling_params([sample.message for sample in samples])
    return [
        SampleRow(
            prompt_messages=sample.prompt_messages,
            prompt_token_ids=list(sample.prompt_token_ids),
            response_token_ids=list(sample.response_token_ids),
            response_logprobs=[float(x) for x in sample.response_logprobs],
            reward=sample.reward if sample.kind in (Sample.Kind.RL, Sample.Kind.COMBINED) else None,
            hint=(sample.hint or None) if sample.kind != Sample.Kind.MEMORY else None,
            correction=sample.correction,
            group_id=sample.group_key or None,
            tools=params[sample.message_id].get("tools") or None,
            temperature=_temperature(params[sample.message_id]),
            memory=sample.hint if sample.kind == Sample.Kind.MEMORY else "",
        )
        for sample in samples
        if sample.prompt_token_ids and sample.response_token_ids
    ]


def _sampling_params(messages: Sequence[Message]) -> dict[int, dict[str, Any]]:
    """Each answer's request parameters: its own, or for an answer stored with
    ``{"same_as": id}`` (a sibling from the same request, an answer sampled beside a 👎) those
    of the answer it names, so a sibling is scored at the temperature it was sampled at."""
    named = {m.sampling_params.get("same_as") for m in messages} - {None}
    first = dict(Message.objects.filter(pk__in=named).values_list("pk", "sampling_params"))
    out = {}
    for message in messages:
        same_as = message.sampling_params.get("same_as")
        out[message.pk] = (first.get(same_as) or {}) if same_as else message.sampling_params
    return out


def _temperature(params: dict[str, Any]) -> float:
    """The temperature vLLM sampled at: the request's, else vLLM's default of 1; a greedy
    request (0) is scored at 1, since its log-probs are the unscaled distribution's."""
    value = params.get("temperature")
    return float(value) if isinstance(value, int | float) and value > 0 else 1.0


@dataclass(frozen=True)
class TrainJob:
    """Everything one update trains on and is gated against, without the ORM."""

    config: dict[str, Any]
    samples: list[SampleRow]
    base_model_dir: Path
    init_adapter_dir: str | None
    out_dir: Path
    processes: int
    base_probe: dict[str, float] | None
    """The base model's probe figures when already measured (kept on version 0)."""
    gate: GateThresholds = field(default_factory=GateThresholds)
    holdout: Sequence[SampleRow] = ()
    """Judged samples outside this update: trained into earlier versions, or ready beyond the
    batch (``trainer.gate``)."""
    fresh: Sequence[SampleRow] = ()
    """The newest judged samples, held back from this update: the candidate must not score
    worse on them than live; ``holdout`` decides only where there are none."""
    threads: int = 0
    """torch's threads for the run (``PARLEY_TRAIN_THREADS``, ``trainer.threads``); 0:
    torch's own."""
    memories: Sequence[tuple[int, str]] = ()  # (id, text) distilled: the gate measures each


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


def gate_thresholds() -> GateThresholds:
    return GateThresholds(
        max_kl=settings.GATE_MAX_KL,
        max_ppl_ratio=settings.GATE_MAX_PPL_RATIO,
        max_feedback_drop=settings.GATE_MAX_FEEDBACK_DROP,
        max_degenerate_extra=settings.GATE_MAX_DEGENERATE_EXTRA,
        max_repeating_extra=settings.GATE_MAX_REPEATING_EXTRA,
    )


def train_job(*, update: TrainingUpdate) -> TrainJob:
    """The claimed update as the trainer sees it: its rows, folders and gate."""
    live = update.base_version
    summary = update.summary
    return TrainJob(
        config=update.config,
        samples=sample_rows(summary.get("sample_ids", [])),
        base_model_dir=Path(settings.BASE_MODEL_DIR),
        init_adapter_dir=(
            live.adapter_path if live and live.number and live.adapter_path else None
        ),
        out_dir=Path(settings.ADAPTERS_DIR) / f"update-{update.pk}",
        processes=settings.TRAIN_PROCESSES,
        base_probe=base_probe_cached(),
        gate=gate_thresholds(),
        holdout=sample_rows(summary.get("holdout_ids", [])),
        fresh=sample_rows(summary.get("fresh_ids", [])),
        memories=distilled_memories(sample_ids=summary.get("sample_ids", [])),
        threads=train_threads(
            settings.TRAIN_THREADS,
            serving_threads=settings.SERVE_THREADS,
            train_workers=settings.TRAIN_WORKERS,
        ),
    )


def train_and_gate(job: TrainJob, *, record_step: Callable[[dict[str, Any]], None]) -> TrainResult:
    """The real ``TrainRun``: stored rows → ``trainer.batch.Sample``s with the base model's
    tokenizer → ``trainer.pipeline.train_and_probe`` (the update, one process per GPU when
    several, then the probe figures of the candidate and of the base on the model it holds in
    memory) → the gate's decision."""
    from transformers import AutoTokenizer  # the train worker's alone: see the module doc

    from trainer.batch import trainer_sample
    from trainer.config import config_from_dict
    from trainer.pipeline import train_and_probe
    from trainer.threads import torch_threads

    tokenizer = AutoTokenizer.from_pretrained(str(job.base_model_dir))

    def samples(rows: Sequence[SampleRow]) -> list[Any]:
        return [trainer_sample(tokenizer, **vars(row)) for row in rows]

    summary: dict[str, Any] = {}
    with torch_threads(job.threads):
        for metrics in train_and_probe(
            config_from_dict(job.config),
            samples(job.samples),
            base_model_dir=job.base_model_dir,
            init_adapter_dir=job.init_adapter_dir,
            out_adapter_dir=job.out_dir,
            processes=job.processes,
            holdout=samples(job.holdout),
            fresh=samples(job.fresh),
            base_probe=job.base_probe,
            memories=[text for _, text in job.memories],
            memory_form=settings.MEMORY_FORM,
        ):
            if metrics.get("done"):
                summary = {**metrics, "threads": job.threads}
            else:
                record_step(metrics)
    for figures, (memory_id, _) in zip(summary.get("memory_gaps", []), job.memories, strict=False):
        figures["id"] = memory_id
    return gated(job, summary)


def gated(job: TrainJob, summary: dict[str, Any]) -> TrainResult:
    """The trainer's summary of one update, with its probe figures taken out and decided on."""
    summary = dict(summary)
    probe, base_probe = summary.pop("probe"), summary.pop("base_probe")
    passed, reasons = job.gate.decide(probe, base_probe)
    return TrainResult(
        summary=summary, probe=probe, base_probe=base_probe, passed=passed, reasons=reasons
    )


def training_update_record_step(*, update: TrainingUpdate, metrics: dict[str, Any]) -> None:
    update.metrics = [*update.metrics, metrics]
    update.save(update_fields=["metrics"])


def base_probe_cached() -> dict[str, float] | None:
    """The base model's probe figures, measured once and kept on version 0 (None until then)."""
    base = PolicyVersion.objects.get(number=0)
    return base.probe_metrics if base.probe_metrics.get("probe_ppl") else None


def base_probe_store(*, probe: dict[str, float]) -> None:
    """Keep the base's probe figures on version 0; not its answers to one update's held-back
    prompts (``held_back_*``), which belong to that update alone."""
    kept = {key: value for key, value in probe.items() if not key.startswith("held_back")}
    PolicyVersion.objects.filter(number=0).update(probe_metrics=kept)


def maybe_train() -> list[int]:
    """Queue updates while train slots are free and batches are due; their ids."""
    return [update.pk for update in claiming.training_updates_queue()]


class TrainTogether(Protocol):
    """Train several people's updates in one stacked run, then gate each (one result per job,
    in order); ``record_step`` gets the job's index with each step's metrics."""

    def __call__(
        self, jobs: Sequence[TrainJob], *, record_step: Callable[[int, dict[str, Any]], None]
    ) -> list[TrainResult]: ...


def train_update(
    update_id: int,
    *,
    run: TrainRun,
    push: publishing.AdapterPush | None = None,
    together: TrainTogether | None = None,
    people: int = 1,
) -> int | None:
    """Train, gate and publish one update; the new version number (None: nothing to do).

    With ``together`` and ``people`` > 1, other people's queued updates join it, up to
    ``people`` in all, each under its own lineage's lock, and train in one stacked run; each is
    still gated, finished and published on its own. A joined update's own task later finds it
    finished and does nothing.

    Raises TrainingBusy while another update of its lineage holds the lineage's lock.
    """
    owner_id = (
        TrainingUpdate.objects.filter(pk=update_id).values_list("owner_id", flat=True).first()
    )
    with contextlib.ExitStack() as locks:
        if not locks.enter_context(training_lock(owner_id)):
            raise TrainingBusy(f"update {update_id} waits for the training lock")
        update = claiming.training_update_claim(update_id=update_id)
        if update is None:  # already finished: publish what it left, if anything
            leftover = publishing.training_update_unpublished(update_id=update_id)
            if leftover is None:
                return None
            return publishing.policy_version_publish(version=leftover, push=push).number
        group = [update]
        if together is not None and people > 1:
            group += _joining(locks, update=update, limit=people - 1)
        versions = _train_group(group, run=run, together=together)
    # The version's status, not the gate's verdict: finishing also rejects a candidate whose
    # samples an owner deleted while it trained.
    for version in versions:
        if version.status == PolicyVersion.Status.CANDIDATE:
            publishing.policy_version_publish(version=version, push=push)
    enqueue(Task.MAYBE_TRAIN)  # more samples may have arrived while this one trained
    return versions[0].number


def _joining(
    locks: contextlib.ExitStack, *, update: TrainingUpdate, limit: int
) -> list[TrainingUpdate]:
    """Other lineages' queued updates, oldest first, that this run takes (their locks held)."""
    joined: list[TrainingUpdate] = []
    owners = {update.owner_id}
    waiting = (
        TrainingUpdate.objects.filter(status=TrainingUpdate.Status.QUEUED)
        .exclude(pk=update.pk)
        .order_by("created_at", "pk")
    )
    for other in waiting[: limit * 4]:
        if len(joined) >= limit:
            break
        if other.owner_id in owners or not locks.enter_context(training_lock(other.owner_id)):
            continue
        claimed = claiming.training_update_claim(update_id=other.pk)
        if claimed is not None:
            joined.append(claimed)
            owners.add(other.owner_id)
    return joined


def _train_group(
    group: list[TrainingUpdate], *, run: TrainRun, together: TrainTogether | None
) -> list[PolicyVersion]:
    """Train the claimed updates (alone: ``run``; several: ``together``) and finish each."""
    try:
        jobs = [train_job(update=update) for update in group]
        started = time.monotonic()
        if len(group) == 1 or together is None:
            results = [
                run(
                    jobs[0],
                    record_step=lambda m: training_update_record_step(update=group[0], metrics=m),
                )
            ]
        else:
            results = together(
                jobs,
                record_step=lambda i, m: training_update_record_step(update=group[i], metrics=m),
            )
        seconds = time.monotonic() - started
    except Exception:
        for update in group:
            publishing.training_update_fail(update_id=update.pk, error=traceback.format_exc())
        raise
    versions = []
    for update, job, result in zip(group, jobs, results, strict=True):
        try:
            if job.base_probe is None:
                base_probe_store(probe=result.base_probe)
            summary = {**result.summary, "train_seconds": seconds, "people_in_step": len(group)}
            versions.append(
                publishing.training_update_finish(
                    update=update,
                    summary=summary,
                    adapter_dir=job.out_dir,
                    probe=result.probe,
                    passed=result.passed,
                    reasons=result.reasons,
                )
            )
        except Exception:
            publishing.training_update_fail(update_id=update.pk, error=traceback.format_exc())
            raise
    return versions
