"""When updates run, which samples they consume (exactly once), publishing and rollback."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.factories import AnswerFactory
from trainer.algorithms import SAMPLE_KINDS
from trainer.claim import fresh_choice
from trainer.publish import PublishError
from webapp.core.outbox import Task
from webapp.learning.models import Judgement, PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live
from webapp.learning.workflows import claiming, publishing, training
from webapp.learning.workflows.publishing import PublishFailed, policy_version_publish
from webapp.learning.workflows.training import TrainingBusy, TrainJob, TrainResult, train_update

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """The ids of queued train_update tasks (other tasks are dropped)."""
    queued: list[int] = []

    def send(task, args):
        if task == Task.TRAIN_UPDATE:
            queued.extend(args)

    monkeypatch.setattr("webapp.core.outbox.send", send)
    return queued


class FakePush(list):
    """An adapter push that records each call and loads nothing."""

    def __call__(self, adapter_dir, *, lora_name, serving_urls, timeout=30.0, api_key=""):
        self.append(
            {"dir": str(adapter_dir), "name": lora_name, "urls": list(serving_urls), "key": api_key}
        )
        return [{"replica": u, "status": 200} for u in serving_urls]


@pytest.fixture
def pushed() -> FakePush:
    return FakePush()


def _samples(n: int) -> list[Sample]:
    user = get_user_model().objects.get_or_create(username="alice")[0]
    out = []
    for i in range(n):
        answer = AnswerFactory(
            parent__conversation__owner=user,
            parent__content=f"q{i}",
            content="a",
            token_ids=[5, 6],
            token_logprobs=[-1.0, -1.0],
            prompt_token_ids=[1, 2],
            usage=None,
            served_model="base",
            sampling_params={},
        )
        judgement = Judgement.objects.create(
            message=answer, fingerprint=f"f{i}", source="feedback", score=1
        )
        out.append(
            Sample.objects.create(
                message=answer,
                judgement=judgement,
                kind="rl",
                reward=1.0,
                prompt_token_ids=[1, 2],
                response_token_ids=[5, 6],
                response_logprobs=[-1.0, -1.0],
                prompt_messages=[{"role": "user", "content": f"q{i}"}],
                policy_version=policy_version_live(),
            )
        )
    return out


def test_an_update_is_queued_only_when_the_batch_is_full(
    settings, no_broker, django_capture_on_commit_callbacks
) -> None:
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 3, 3600
    _samples(2)
    assert claiming.training_update_maybe_queue() is None
    _samples(1)
    with django_capture_on_commit_callbacks(execute=True):
        update = claiming.training_update_maybe_queue()
    assert update is not None and no_broker == [update.pk]
    assert (
        update.config["algorithm"] == settings.TRAIN_ALGORITHM and update.config["clip_low"] == 0.2
    )


def test_an_algorithm_without_rewards_never_claims_a_batch_it_cannot_train(settings) -> None:
    """opd learns from hints and corrections only: 👍/👎 alone are not its batch (a batch of
    only those made the trainer raise), and they stay ready for an algorithm that uses them."""
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 2, 3600
    settings.TRAIN_ALGORITHM = "opd"
    thumbs = _samples(3)
    assert claiming.training_update_maybe_queue() is None
    hinted, corrected = _samples(2)
    Sample.objects.filter(pk=hinted.pk).update(hint="Start with 'Sure!'.")
    Sample.objects.filter(pk=corrected.pk).update(correction="Sure! a")
    update = claiming.training_update_maybe_queue()
    assert update is not None and update.algorithm == "opd"
    claimed = claiming.training_update_claim(update_id=update.pk)
    assert claimed.summary["sample_ids"] == [hinted.pk, corrected.pk]
    assert all(
        s.status == Sample.Status.READY
        for s in Sample.objects.filter(pk__in=[t.pk for t in thumbs])
    )
    # The other algorithms train on rewards: the oldest ready samples, thumbs first.
    assert claiming.claimable_samples(algorithm="rl").order_by("created_at").first() == thumbs[0]


@pytest.mark.parametrize("algorithm", ["rl", "opd", "combined"])
def test_the_claim_the_count_and_the_reason_agree_on_every_shape(settings, algorithm) -> None:
    """Each ready sample is either claimable or counted unused with a reason, never both and
    never neither, on the shapes ``services._sample_kind`` stores: a thumb alone (rl), a hint
    alone, a correction alone, a hint with a correction (opd), a hint with a thumb and a
    correction with a thumb (combined)."""
    from webapp.learning.selectors import sample_counts, sample_unused_reason

    settings.TRAIN_ALGORITHM = algorithm
    thumb, hint_only, hint_thumb, corrected, both, corrected_thumb = _samples(6)
    Sample.objects.filter(pk=hint_only.pk).update(kind="opd", reward=0.0, hint="Say 'Sure!'.")
    Sample.objects.filter(pk=hint_thumb.pk).update(kind="combined", hint="Say 'Sure!'.")
    Sample.objects.filter(pk=corrected.pk).update(kind="opd", reward=0.0, correction="Sure! a")
    Sample.objects.filter(pk=both.pk).update(
        kind="opd", reward=0.0, hint="Say 'Sure!'.", correction="Sure! b"
    )
    Sample.objects.filter(pk=corrected_thumb.pk).update(kind="combined", correction="Sure! c")
    claimable = set(claiming.claimable_samples(algorithm=algorithm).values_list("pk", flat=True))
    unused = {
        s.pk
        for s in Sample.objects.filter(status=Sample.Status.READY)
        if sample_unused_reason(kind=s.kind, hint=s.hint, correction=s.correction)
    }
    every = {thumb.pk, hint_only.pk, hint_thumb.pk, corrected.pk, both.pk, corrected_thumb.pk}
    assert claimable | unused == every and not claimable & unused
    assert sample_counts()["unused_by_algorithm"] == len(unused)
    assert unused == {"rl": {hint_only.pk}, "opd": {thumb.pk}, "combined": set()}[algorithm]


def test_rl_leaves_a_hint_only_sample_and_an_emptied_claim_ends_cleanly(settings) -> None:
    """A hint-only OPD sample has no reward for rl to train; and an update whose samples are
    gone when it starts (re-judged, deleted) fails with a reason, not a trainer traceback."""
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 8, 0
    settings.TRAIN_ALGORITHM = "rl"
    [hinted] = _samples(1)
    Sample.objects.filter(pk=hinted.pk).update(kind="opd", reward=0.0, hint="Say 'Sure!'.")
    assert not claiming.claimable_samples(algorithm="rl").exists()
    assert claiming.claimable_samples(algorithm="combined").get() == hinted
    assert claiming.training_update_maybe_queue() is None
    [thumb] = _samples(1)
    update = claiming.training_update_maybe_queue()
    assert update is not None
    Sample.objects.filter(pk=thumb.pk).delete()
    assert claiming.training_update_claim(update_id=update.pk) is None
    update.refresh_from_db()
    assert update.status == TrainingUpdate.Status.FAILED
    assert update.error.startswith("No ready sample this algorithm trains on")


def test_the_base_probe_kept_on_version_0_leaves_out_one_updates_held_back_answers() -> None:
    training.base_probe_store(
        probe={"probe_ppl": 20.0, "degenerate_repeating": 0.0, "held_back_repeating": 2.0}
    )
    assert training.base_probe_cached() == {"probe_ppl": 20.0, "degenerate_repeating": 0.0}


def test_samples_that_waited_too_long_trigger_a_smaller_update(settings) -> None:
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 8, 0
    _samples(1)
    assert claiming.training_update_maybe_queue() is not None


def test_single_flight_one_update_at_a_time(settings) -> None:
    settings.TRAIN_BATCH_SIZE = 1
    _samples(3)
    first = claiming.training_update_maybe_queue()
    assert first is not None
    assert claiming.training_update_maybe_queue() is None
    claiming.training_update_claim(update_id=first.pk)
    assert claiming.training_update_maybe_queue() is None


def test_samples_are_consumed_exactly_once(settings, tmp_path) -> None:
    settings.TRAIN_BATCH_SIZE = 2
    samples = _samples(3)
    update = claiming.training_update_maybe_queue(force=True)
    claimed = claiming.training_update_claim(update_id=update.pk)
    assert claimed.summary["sample_ids"] == [samples[0].pk, samples[1].pk]
    # A crash here leaves every sample ready: a redelivered task claims the same batch again.
    assert Sample.objects.filter(status="ready").count() == 3
    again = claiming.training_update_claim(update_id=update.pk)
    assert again.summary["sample_ids"] == claimed.summary["sample_ids"]
    version = publishing.training_update_finish(
        update=again,
        summary={"loss": 0.1},
        adapter_dir=tmp_path,
        probe={"probe_kl": 0.01},
        passed=True,
        reasons=[],
    )
    assert version.number == 1 and version.status == "candidate"
    assert sorted(Sample.objects.filter(status="consumed").values_list("pk", flat=True)) == [
        samples[0].pk,
        samples[1].pk,
    ]
    assert Sample.objects.get(pk=samples[2].pk).status == "ready"
    assert claiming.training_update_claim(update_id=update.pk) is None  # finished: nothing to redo


def test_a_version_left_unpublished_by_a_dead_worker_is_published_on_redelivery(
    tmp_path, pushed
) -> None:
    _samples(2)
    update = claiming.training_update_claim(
        update_id=claiming.training_update_maybe_queue(force=True).pk
    )
    assert publishing.training_update_unpublished(update_id=update.pk) is None  # still running
    version = publishing.training_update_finish(
        update=update, summary={}, adapter_dir=tmp_path, probe={}, passed=True, reasons=[]
    )
    # The worker died here, before publishing: the redelivered task finds the candidate.
    assert publishing.training_update_unpublished(update_id=update.pk) == version
    policy_version_publish(version=version, push=pushed)
    assert publishing.training_update_unpublished(update_id=update.pk) is None  # live now
    assert len(pushed) == 1


def test_a_leftover_candidate_never_replaces_a_newer_live_version(tmp_path, pushed) -> None:
    _samples(2)
    older = claiming.training_update_claim(
        update_id=claiming.training_update_maybe_queue(force=True).pk
    )
    publishing.training_update_finish(
        update=older, summary={}, adapter_dir=tmp_path, probe={}, passed=True, reasons=[]
    )
    newer = PolicyVersion.objects.create(number=2, adapter_path=str(tmp_path))
    policy_version_publish(version=newer, push=pushed)
    assert publishing.training_update_unpublished(update_id=older.pk) is None
    assert policy_version_live() == newer


def test_a_candidate_that_fails_the_gate_is_recorded_not_published(tmp_path, pushed) -> None:
    _samples(1)
    update = claiming.training_update_claim(
        update_id=claiming.training_update_maybe_queue(force=True).pk
    )
    version = publishing.training_update_finish(
        update=update,
        summary={},
        adapter_dir=tmp_path,
        probe={"probe_kl": 9.0},
        passed=False,
        reasons=["probe KL 9.0 > 0.5"],
    )
    assert version.status == "rejected"
    assert TrainingUpdate.objects.get(pk=update.pk).status == "rejected"
    with pytest.raises(PublishFailed):
        policy_version_publish(version=version, push=pushed)
    assert pushed == [] and policy_version_live().number == 0


def test_publish_loads_every_replica_then_goes_live_and_rollback_uses_the_same_path(
    settings, tmp_path, pushed
) -> None:
    settings.VLLM_BASE_URLS = ["http://a:1/v1", "http://b:2/v1"]
    v1 = PolicyVersion.objects.create(
        number=1, adapter_path=str(tmp_path / "v1"), status="candidate"
    )
    v2 = PolicyVersion.objects.create(
        number=2, adapter_path=str(tmp_path / "v2"), status="candidate"
    )
    policy_version_publish(version=v1, push=pushed)
    policy_version_publish(version=v2, push=pushed)
    assert [c["name"] for c in pushed] == ["parley-v1", "parley-v2"]
    assert pushed[0]["urls"] == settings.VLLM_BASE_URLS
    assert pushed[0]["key"] == settings.VLLM_API_KEY  # vLLM refuses adapter loads without it
    assert policy_version_live() == v2
    policy_version_publish(version=v1, push=pushed)  # rollback
    assert policy_version_live() == v1
    assert PolicyVersion.objects.get(pk=v2.pk).status == "retired"
    assert PolicyVersion.objects.filter(status="live").count() == 1


def test_a_refusing_replica_publishes_nothing(settings, tmp_path) -> None:
    def refuse(*a, **k):
        raise PublishError("http://b:2/v1", "answered 500")

    v1 = PolicyVersion.objects.create(number=1, adapter_path=str(tmp_path), status="candidate")
    with pytest.raises(PublishFailed, match="b:2"):
        policy_version_publish(version=v1, push=refuse)
    assert policy_version_live().number == 0


def test_the_training_lock_is_single_flight() -> None:
    from django.db import connections

    with training.training_lock() as first:
        assert first
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [training.TRAINING_LOCK_KEY])
                assert cursor.fetchone()[0] is False
        finally:
            other.close()


class FakeRun:
    """A trainer that writes an empty adapter, records one step and reports a gate result."""

    def __init__(self, *, passed: bool = True, error: str = "") -> None:
        self.passed, self.error = passed, error
        self.jobs: list[TrainJob] = []

    def __call__(self, job: TrainJob, *, record_step) -> TrainResult:
        self.jobs.append(job)
        if self.error:
            raise RuntimeError(self.error)
        job.out_dir.mkdir(parents=True)
        (job.out_dir / "adapter_config.json").write_text("{}")
        record_step({"step": 0, "loss": 0.5})
        return TrainResult(
            summary={"loss": 0.4, "done": True},
            probe={"probe_kl": 0.01, "probe_ppl": 10.0},
            base_probe={"probe_ppl": 9.9},
            passed=self.passed,
            reasons=[] if self.passed else ["probe KL 9.0 > 0.5"],
        )


def test_train_update_trains_gates_and_publishes_once(settings, tmp_path, pushed) -> None:
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 2
    _samples(3)
    update = claiming.training_update_maybe_queue(force=True)
    run = FakeRun()
    assert train_update(update.pk, run=run, push=pushed) == 1
    (job,) = run.jobs
    assert [row.response_token_ids for row in job.samples] == [[5, 6], [5, 6]]
    assert job.base_probe is None and job.init_adapter_dir is None
    update.refresh_from_db()
    assert update.status == "done" and update.metrics == [{"step": 0, "loss": 0.5}]
    assert update.summary["loss"] == 0.4 and update.summary["gate"]["passed"] is True
    alice = get_user_model().objects.get(username="alice")
    assert policy_version_live(owner_id=alice.pk).number == 1  # alice's own lineage
    assert policy_version_live().number == 0  # the shared lineage is untouched
    assert [c["name"] for c in pushed] == ["parley-v1"]
    assert PolicyVersion.objects.get(number=0).probe_metrics == {"probe_ppl": 9.9}
    assert Sample.objects.filter(status="consumed").count() == 2
    # A redelivered task trains nothing again and publishes nothing again.
    assert train_update(update.pk, run=run, push=pushed) is None
    assert len(run.jobs) == 1 and len(pushed) == 1


def test_a_failed_training_run_marks_the_update_failed_and_keeps_its_samples(
    settings, tmp_path, pushed
) -> None:
    settings.ADAPTERS_DIR = tmp_path
    _samples(2)
    update = claiming.training_update_maybe_queue(force=True)
    with pytest.raises(RuntimeError, match="out of memory"):
        train_update(update.pk, run=FakeRun(error="out of memory"), push=pushed)
    update.refresh_from_db()
    assert update.status == "failed" and "out of memory" in update.error
    assert Sample.objects.filter(status="ready").count() == 2 and pushed == []


def test_a_candidate_the_gate_rejects_is_not_published(settings, tmp_path, pushed) -> None:
    settings.ADAPTERS_DIR = tmp_path
    _samples(1)
    update = claiming.training_update_maybe_queue(force=True)
    assert train_update(update.pk, run=FakeRun(passed=False), push=pushed) == 1
    assert TrainingUpdate.objects.get(pk=update.pk).status == "rejected"
    assert pushed == [] and policy_version_live().number == 0


def test_train_update_waits_while_another_update_holds_the_lock(pushed) -> None:
    from django.db import connections

    _samples(1)
    update = claiming.training_update_maybe_queue(force=True)
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [training.TRAINING_LOCK_KEY])
        run = FakeRun()
        with pytest.raises(TrainingBusy):
            train_update(update.pk, run=run, push=pushed)
        assert run.jobs == [] and TrainingUpdate.objects.get(pk=update.pk).status == "queued"
    finally:
        other.close()


def test_the_newest_feedback_waits_for_the_next_update_and_checks_this_ones_candidate(
    settings, tmp_path, pushed
) -> None:
    """An update leaves its newest signed samples (PARLEY_GATE_FRESH_SAMPLES, at most a quarter
    of the batch) ready for the next one; the gate scores the candidate on them, feedback no
    version has trained on, so what the user says now outranks what they said before."""
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 8
    assert settings.GATE_FRESH_SAMPLES == 2
    samples = _samples(8)
    update = claiming.training_update_maybe_queue(force=True)
    run = FakeRun()
    assert train_update(update.pk, run=run, push=pushed) == 1
    update.refresh_from_db()
    newest = [s.pk for s in samples[::-1][:2]]
    assert update.summary["fresh_ids"] == newest
    assert update.summary["sample_ids"] == [s.pk for s in samples[:6]]
    assert not set(newest) & set(update.summary["holdout_ids"])
    [job] = run.jobs
    assert (len(job.samples), len(job.fresh)) == (6, 2)
    statuses = dict(Sample.objects.values_list("pk", "status"))
    assert [statuses[pk] for pk in newest] == ["ready", "ready"]  # trained by the next update
    # the next update trains them first (the oldest ready), once
    later = _samples(8)
    update = claiming.training_update_maybe_queue(force=True)
    assert train_update(update.pk, run=run, push=pushed) == 2
    update.refresh_from_db()
    assert set(newest) <= set(update.summary["sample_ids"])
    assert update.summary["fresh_ids"] == [s.pk for s in later[::-1][:2]]
    # a batch smaller than four trains whole: nothing is left fresh
    assert fresh_choice(claiming.candidates(Sample.objects.filter(pk__in=newest)), count=2) == []


def test_no_batch_is_left_without_a_signal_by_its_fresh_samples(settings, tmp_path) -> None:
    """Six closed conversations without feedback (reward 0) and two 👍: leaving the 👍s fresh
    would leave a batch that trains nothing, so the update trains all eight."""
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 8
    samples = _samples(8)
    Sample.objects.filter(pk__in=[s.pk for s in samples[:6]]).update(reward=0.0)
    update = claiming.training_update_maybe_queue(force=True)
    claimed = claiming.training_update_claim(update_id=update.pk)
    assert claimed.summary["fresh_ids"] == []
    assert sorted(claimed.summary["sample_ids"]) == sorted(s.pk for s in samples)


def test_unrated_answers_neither_fill_a_batch_nor_take_the_place_of_feedback(settings) -> None:
    """What a new user does: twelve questions without feedback (their conversations closed,
    reward-0 samples), then corrections. The unrated answers never make a batch due; once
    eight samples with a signal are ready, the update trains those eight, not the twelve older
    unrated ones (which made a version that trained nothing)."""
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 8, 3600
    unrated = _samples(12)
    Sample.objects.filter(pk__in=[s.pk for s in unrated]).update(reward=0.0)
    assert claiming.training_update_maybe_queue() is None
    feedback = _samples(7)
    assert claiming.training_update_maybe_queue() is None  # 7 with a signal, 19 ready
    feedback += _samples(1)
    update = claiming.training_update_maybe_queue()
    assert update is not None
    claimed = claiming.training_update_claim(update_id=update.pk)
    left_fresh = claimed.summary["fresh_ids"]
    assert len(left_fresh) == settings.GATE_FRESH_SAMPLES
    trained = claimed.summary["sample_ids"]
    assert set(trained) == {s.pk for s in feedback} - set(left_fresh) | {
        s.pk for s in unrated[: settings.GATE_FRESH_SAMPLES]
    }  # the places the fresh ones leave go to the oldest unrated answers
    assert trained[:6] == [s.pk for s in feedback[:6]]


def test_unrated_answers_wait_for_an_update_with_feedback(settings) -> None:
    """The wait trigger counts from the oldest sample with a signal: unrated answers that have
    waited long start no update on their own, and one 👍 that waited long does."""
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 8, 3600
    unrated = _samples(3)
    Sample.objects.filter(pk__in=[s.pk for s in unrated]).update(
        reward=0.0, created_at=timezone.now() - timedelta(hours=2)
    )
    rated = _samples(1)
    assert claiming.training_update_maybe_queue() is None
    Sample.objects.filter(pk=rated[0].pk).update(created_at=timezone.now() - timedelta(hours=2))
    assert claiming.training_update_maybe_queue() is not None


def test_the_stored_sample_kinds_are_the_registrys() -> None:
    assert set(Sample.Kind.values) == set(SAMPLE_KINDS)


def test_the_holdout_leaves_out_the_batch_that_trained_the_live_version(
    settings, tmp_path, pushed
) -> None:
    """The live version has just fitted its own batch, so checking a candidate against it there
    favours the live version: the holdout is older feedback, and ready feedback not claimed."""
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 2
    first_batch = _samples(2)
    update = claiming.training_update_maybe_queue(force=True)
    assert train_update(update.pk, run=FakeRun(), push=pushed) == 1
    alice = get_user_model().objects.get(username="alice")
    assert claiming.holdout_ids(exclude=[], owner_id=alice.pk) == []  # v1 fitted them
    second_batch = _samples(2)
    update = claiming.training_update_maybe_queue(force=True)
    claimed = claiming.training_update_claim(update_id=update.pk)
    assert claimed.summary["holdout_ids"] == []  # the batch is v2's, the rest v1's own
    assert train_update(update.pk, run=FakeRun(), push=pushed) == 2
    waiting = _samples(1)
    held = claiming.holdout_ids(exclude=[], owner_id=alice.pk)
    # newest first: the ready one, then v1's batch; v2's own batch is left out
    assert held == [waiting[0].pk, *sorted((s.pk for s in first_batch), reverse=True)]
    assert not {s.pk for s in second_batch} & set(held)
