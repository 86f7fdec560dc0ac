"""Train and gate: the training lock, train_update end to end with a fake trainer, failures
and the base probe kept on version 0."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.webapp.learning.updates import FakeRun, ready_samples
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live
from webapp.learning.workflows import claiming, training
from webapp.learning.workflows.training import TrainingBusy, train_update

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.usefixtures("no_broker")]


def test_the_base_probe_kept_on_version_0_leaves_out_one_updates_held_back_answers() -> None:
    training.base_probe_store(
        probe={"probe_ppl": 20.0, "degenerate_repeating": 0.0, "held_back_repeating": 2.0}
    )
    assert training.base_probe_cached() == {"probe_ppl": 20.0, "degenerate_repeating": 0.0}


def _lineage_key(owner_id: int | None) -> list[int]:
    return [training.TRAINING_LOCK_KEY, training.lineage_lock_key(owner_id)]


def test_the_training_lock_is_single_flight_per_lineage() -> None:
    from django.db import connections

    with training.training_lock(7) as first:
        assert first
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", _lineage_key(7))
                assert cursor.fetchone()[0] is False  # the same lineage waits
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", _lineage_key(8))
                assert cursor.fetchone()[0] is True  # another lineage trains alongside
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", _lineage_key(None))
                assert cursor.fetchone()[0] is True  # and so does the shared one
        finally:
            other.close()


def test_lineage_lock_keys_are_32_bit_and_apart_from_the_shared_lineage() -> None:
    keys = [training.lineage_lock_key(owner) for owner in (1, 2, 2**31 - 2, 2**31 - 1, 2**40)]
    assert all(0 < key < 2**31 for key in keys) and training.lineage_lock_key(None) == 0
    assert len(set(keys[:3])) == 3


def test_train_update_trains_gates_and_publishes_once(settings, tmp_path, pushed) -> None:
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 2
    ready_samples(3)
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
    ready_samples(2)
    update = claiming.training_update_maybe_queue(force=True)
    with pytest.raises(RuntimeError, match="out of memory"):
        train_update(update.pk, run=FakeRun(error="out of memory"), push=pushed)
    update.refresh_from_db()
    assert update.status == "failed" and "out of memory" in update.error
    assert Sample.objects.filter(status="ready").count() == 2 and pushed == []


def test_a_candidate_the_gate_rejects_is_not_published(settings, tmp_path, pushed) -> None:
    settings.ADAPTERS_DIR = tmp_path
    ready_samples(1)
    update = claiming.training_update_maybe_queue(force=True)
    assert train_update(update.pk, run=FakeRun(passed=False), push=pushed) == 1
    assert TrainingUpdate.objects.get(pk=update.pk).status == "rejected"
    assert pushed == [] and policy_version_live().number == 0


def test_train_update_waits_while_another_update_of_its_lineage_holds_the_lock(pushed) -> None:
    from django.db import connections

    ready_samples(1)
    update = claiming.training_update_maybe_queue(force=True)
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", _lineage_key(update.owner_id))
        run = FakeRun()
        with pytest.raises(TrainingBusy):
            train_update(update.pk, run=run, push=pushed)
        assert run.jobs == [] and TrainingUpdate.objects.get(pk=update.pk).status == "queued"
    finally:
        other.close()
