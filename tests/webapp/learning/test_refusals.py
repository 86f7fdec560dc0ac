"""No feedback is lost: a refused update gives its samples back; they are retried with a
smaller step, then excluded with a reason; the counts always add up."""

from __future__ import annotations

import pytest

from tests.webapp.learning.updates import FakePush, FakeRun, ready_samples
from webapp.core.outbox import Task
from webapp.learning.models import Sample, TrainingUpdate
from webapp.learning.selectors import learning_statuses, sample_counts
from webapp.learning.services import sample_exclude
from webapp.learning.workflows import claiming
from webapp.learning.workflows.training import train_update

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("webapp.core.outbox.send", lambda task, args: None)
    assert Task.TRAIN_UPDATE


def _adds_up() -> dict[str, int]:
    counts = sample_counts()
    assert counts["trained"] + counts["waiting"] + counts["excluded"] == counts["total"]
    assert counts["excluded_without_reason"] == 0
    return counts


def _train(run: FakeRun) -> TrainingUpdate:
    update = claiming.training_update_maybe_queue(force=True)
    assert update is not None
    train_update(update.pk, run=run, push=FakePush())
    update.refresh_from_db()
    return update


def test_refused_samples_come_back_with_a_smaller_step_then_are_excluded(
    settings, tmp_path
) -> None:
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 2
    settings.TRAIN_MAX_REFUSALS, settings.TRAIN_REFUSAL_LR_FACTOR = 2, 0.5
    settings.TRAIN_LR = 1e-3
    first, second, third = ready_samples(3)
    assert _adds_up() == {
        "trained": 0,
        "waiting": 3,
        "excluded": 0,
        "excluded_without_reason": 0,
        "refused_waiting": 0,
        "unused_by_algorithm": 0,
        "total": 3,
    }

    refused = _train(FakeRun(passed=False))
    assert refused.status == "rejected" and refused.config["lr"] == 1e-3
    assert refused.config["refusals"] == 0
    assert set(Sample.objects.values_list("pk", "status", "refusals")) == {
        (first.pk, "ready", 1),
        (second.pk, "ready", 1),
        (third.pk, "ready", 0),
    }
    assert _adds_up()["refused_waiting"] == 2
    status = learning_statuses(message_ids=[first.message_id])[first.message_id]
    assert "waiting to train again (refused by the gate 1×)" in status.detail
    assert status.text == "Will be learnt in a later update"

    # The oldest (refused) samples come first, at half the learning rate.
    retried = _train(FakeRun(passed=False))
    assert retried.summary["sample_ids"] == [first.pk, second.pk]
    assert retried.config["lr"] == pytest.approx(5e-4) and retried.config["refusals"] == 1
    assert retried.config["lr_before_refusals"] == 1e-3
    counts = _adds_up()
    assert (counts["waiting"], counts["excluded"]) == (1, 2)
    excluded = Sample.objects.get(pk=first.pk)
    assert excluded.status == "excluded" and excluded.refusals == 2
    assert excluded.exclusion_reason.startswith("refused by the probe gate 2 times; last:")
    assert "probe KL 9.0 > 0.5" in excluded.exclusion_reason
    status = learning_statuses(message_ids=[first.message_id])[first.message_id]
    assert "excluded from training: refused by the probe gate 2 times" in status.detail
    assert status.text == "Not used for learning"

    trained = _train(FakeRun(passed=True))
    assert trained.status == "done" and trained.config["lr"] == 1e-3
    assert trained.summary["sample_ids"] == [third.pk]
    assert _adds_up() == {
        "trained": 1,
        "waiting": 0,
        "excluded": 2,
        "excluded_without_reason": 0,
        "refused_waiting": 0,
        "unused_by_algorithm": 0,
        "total": 3,
    }


def test_a_claim_run_twice_does_not_halve_twice(settings) -> None:
    settings.TRAIN_LR, settings.TRAIN_REFUSAL_LR_FACTOR = 1e-3, 0.5
    (sample,) = ready_samples(1)
    Sample.objects.filter(pk=sample.pk).update(refusals=2)
    update = claiming.training_update_maybe_queue(force=True)
    claiming.training_update_claim(update_id=update.pk)
    again = claiming.training_update_claim(update_id=update.pk)
    assert again.config["lr"] == pytest.approx(2.5e-4)


def test_the_update_holds_back_recent_judged_samples_it_does_not_train(settings, tmp_path) -> None:
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 2
    settings.GATE_HOLDOUT_SAMPLES = 8
    samples = ready_samples(2)
    _train(FakeRun(passed=True))  # both trained into v1
    newer = ready_samples(3)
    run = FakeRun(passed=True)
    update = _train(run)
    assert update.summary["sample_ids"] == [newer[0].pk, newer[1].pk]
    # Not trained here: the one left waiting. Not the two trained into v1 either: v1 is the
    # live version, which has just fitted them (the holdout_ids docstring says why).
    assert update.summary["holdout_ids"] == [newer[2].pk]
    assert {samples[0].pk, samples[1].pk}.isdisjoint(update.summary["holdout_ids"])
    (job,) = run.jobs
    assert len(job.holdout) == 1 and all(row.reward == 1.0 for row in job.holdout)


def test_admin_exclusions_and_superseded_samples_carry_a_reason() -> None:
    first, second = ready_samples(2)
    sample_exclude(sample=first)
    Sample.objects.filter(pk=second.pk).update(status="superseded", exclusion_reason="newer")
    assert Sample.objects.get(pk=first.pk).exclusion_reason == "excluded by an admin"
    assert _adds_up()["excluded"] == 2


def test_a_config_without_a_learning_rate_backs_off_from_the_default() -> None:
    """An update created with a partial config (only the algorithm) must still be claimable."""
    from trainer.config import UpdateConfig
    from webapp.learning.workflows.claiming import refusal_backoff

    assert refusal_backoff({"algorithm": "rl"}, refusals=0)["lr"] == UpdateConfig.lr
