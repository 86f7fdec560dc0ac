"""Updates of different lineages side by side (PARLEY_TRAIN_WORKERS): single flight per
lineage, the slot limit, who goes first, and version numbers when updates finish together."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections

from tests.webapp.learning.updates import FakePush, FakeRun, user_samples
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.workflows import claiming, training
from webapp.learning.workflows.publishing import training_update_finish

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.usefixtures("no_broker")]


@pytest.fixture(autouse=True)
def user_scope(settings, tmp_path):
    settings.LEARNING_SCOPE = "user"
    settings.ADAPTERS_DIR = tmp_path
    settings.TRAIN_MAX_WAIT_S = 3600
    settings.TRAIN_BATCH_SIZE = 2
    settings.TRAIN_PEOPLE_PER_STEP = 1


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password="x" * 12)


def _aged(samples: list[Sample], hours: float) -> None:
    Sample.objects.filter(pk__in=[s.pk for s in samples]).update(
        created_at=samples[0].created_at - timedelta(hours=hours)
    )


def test_two_slots_train_two_lineages_at_once_never_one_lineage_twice(
    settings, alice, bob, carol
) -> None:
    settings.TRAIN_WORKERS = 2
    _aged(user_samples(alice, 2), 3)
    _aged(user_samples(bob, 2), 2)
    user_samples(carol, 2)
    queued = claiming.training_updates_queue()
    assert [update.owner for update in queued] == [alice, bob]  # longest waiting first
    user_samples(alice, 4)  # a second batch of hers: her update is still running
    assert claiming.training_updates_queue() == []  # both slots taken, carol waits
    TrainingUpdate.objects.filter(pk=queued[1].pk).update(status=TrainingUpdate.Status.DONE)
    (third,) = claiming.training_updates_queue()
    assert third.owner == carol  # alice has a batch too, but her update still runs
    assert claiming.training_updates_queue() == []


def test_one_slot_is_one_update_at_a_time(settings, alice, bob) -> None:
    settings.TRAIN_WORKERS = 1
    user_samples(alice, 2)
    user_samples(bob, 2)
    assert len(claiming.training_updates_queue()) == 1
    assert claiming.training_updates_queue() == []


def test_the_shared_lineage_is_single_flight_whatever_the_slots(settings, alice, bob) -> None:
    settings.LEARNING_SCOPE, settings.TRAIN_WORKERS = "shared", 4
    user_samples(alice, 4)
    user_samples(bob, 4)
    (update,) = claiming.training_updates_queue()
    assert update.owner is None


def test_a_flood_waits_from_its_last_update_so_nobody_waits_behind_it(
    settings, alice, bob, carol
) -> None:
    """Alice's 20 answers came first; bob's and carol's later. One slot: after one update of
    hers each of them goes before her second, and she is next after them."""
    settings.TRAIN_WORKERS = 1
    run, push = FakeRun(), FakePush()
    _aged(user_samples(alice, 20), 3)
    _aged(user_samples(bob, 2), 2)
    _aged(user_samples(carol, 2), 1)
    order = []
    for _ in range(5):
        (update,) = claiming.training_updates_queue()
        training.train_update(update.pk, run=run, push=push)
        order.append(update.owner)
    assert order == [alice, bob, carol, alice, alice]


def test_an_update_of_another_lineage_trains_while_one_holds_its_lock(
    settings, alice, bob, pushed
) -> None:
    settings.TRAIN_WORKERS = 2
    user_samples(alice, 2)
    user_samples(bob, 2)
    first, second = claiming.training_updates_queue()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:  # a worker training alice's update right now
            key = [training.TRAINING_LOCK_KEY, training.lineage_lock_key(first.owner_id)]
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", key)
        with pytest.raises(training.TrainingBusy):
            training.train_update(first.pk, run=FakeRun(), push=pushed)
        assert training.train_update(second.pk, run=FakeRun(), push=pushed) is not None
        assert TrainingUpdate.objects.get(pk=second.pk).status == TrainingUpdate.Status.DONE
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
def test_updates_finishing_together_get_different_version_numbers(
    settings, alice, bob, tmp_path
) -> None:
    settings.TRAIN_WORKERS = 2
    user_samples(alice, 2)
    user_samples(bob, 2)
    updates = claiming.training_updates_queue()
    for update in updates:
        claiming.training_update_claim(update_id=update.pk)
    barrier = threading.Barrier(len(updates))
    errors: list[BaseException] = []

    def finish(update: TrainingUpdate) -> None:
        try:
            barrier.wait(timeout=10)
            training_update_finish(
                update=update,
                summary={},
                adapter_dir=tmp_path / f"u{update.pk}",
                probe={},
                passed=True,
                reasons=[],
            )
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=finish, args=(update,)) for update in updates]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    numbers = sorted(PolicyVersion.objects.exclude(number=0).values_list("number", flat=True))
    assert numbers == [1, 2]


class FakeTogether:
    """A stacked run that writes each job's adapter and passes each gate; keeps its calls."""

    def __init__(self) -> None:
        self.calls: list[list[training.TrainJob]] = []

    def __call__(self, jobs, *, record_step) -> list[training.TrainResult]:
        self.calls.append(list(jobs))
        run = FakeRun()
        results = []
        for index, job in enumerate(jobs):
            results.append(run(job, record_step=lambda m, i=index: record_step(i, m)))
        return results


def test_queued_updates_of_other_people_join_one_stacked_run(settings, alice, bob, carol) -> None:
    settings.TRAIN_WORKERS, settings.TRAIN_PEOPLE_PER_STEP = 1, 3
    user_samples(alice, 2)
    user_samples(bob, 2)
    user_samples(carol, 2)
    first, second, third = claiming.training_updates_queue()  # one worker, three people
    together, push = FakeTogether(), FakePush()
    training.train_update(first.pk, run=FakeRun(), push=push, together=together, people=3)
    (jobs,) = together.calls
    assert [job.out_dir.name for job in jobs] == [f"update-{u.pk}" for u in (first, second, third)]
    for update in (first, second, third):
        update.refresh_from_db()
        assert update.status == TrainingUpdate.Status.DONE
        assert update.summary["people_in_step"] == 3 and len(update.metrics) == 1
    assert len(push) == 3  # each published on its own
    # The joined updates' own tasks find them finished.
    assert (
        training.train_update(second.pk, run=FakeRun(), push=push, together=together, people=3)
        is None
    )
    assert len(together.calls) == 1 and len(push) == 3


def test_a_person_whose_lineage_is_locked_elsewhere_does_not_join(settings, alice, bob) -> None:
    settings.TRAIN_WORKERS, settings.TRAIN_PEOPLE_PER_STEP = 1, 2
    user_samples(alice, 2)
    user_samples(bob, 2)
    first, second = claiming.training_updates_queue()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            key = [training.TRAINING_LOCK_KEY, training.lineage_lock_key(second.owner_id)]
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", key)
        run = FakeRun()
        training.train_update(first.pk, run=run, push=FakePush(), together=FakeTogether(), people=2)
        assert len(run.jobs) == 1  # alone: bob's update stays queued for its own task
        assert TrainingUpdate.objects.get(pk=second.pk).status == TrainingUpdate.Status.QUEUED
    finally:
        other.close()


def test_a_failed_stacked_run_fails_every_update_in_it_and_keeps_their_samples(
    settings, alice, bob
) -> None:
    settings.TRAIN_WORKERS, settings.TRAIN_PEOPLE_PER_STEP = 1, 2
    user_samples(alice, 2)
    user_samples(bob, 2)
    first, second = claiming.training_updates_queue()

    def broken(jobs, *, record_step):
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        training.train_update(first.pk, run=FakeRun(), push=FakePush(), together=broken, people=2)
    for update in (first, second):
        update.refresh_from_db()
        assert update.status == TrainingUpdate.Status.FAILED and "out of memory" in update.error
    assert Sample.objects.filter(status=Sample.Status.READY).count() == 4


def test_a_newcomers_first_version_goes_before_a_routine_update(settings, alice, bob) -> None:
    """Alice has a version of her own and her next batch has waited 5 minutes; bob has none
    and his first batch is 1 minute old: bob's update goes first."""
    settings.TRAIN_WORKERS = 1
    user_samples(alice, 2)
    (first,) = claiming.training_updates_queue()
    training.train_update(first.pk, run=FakeRun(), push=FakePush())
    _aged(user_samples(alice, 2), 5 / 60)
    TrainingUpdate.objects.filter(pk=first.pk).update(
        created_at=first.created_at - timedelta(minutes=10)
    )
    _aged(user_samples(bob, 2), 1 / 60)
    (update,) = claiming.training_updates_queue()
    assert update.owner == bob


def test_feedback_waiting_past_the_bound_goes_before_a_newcomer(settings, alice, bob) -> None:
    settings.TRAIN_WORKERS, settings.TRAIN_OVERDUE_S = 1, 600
    user_samples(alice, 2)
    (first,) = claiming.training_updates_queue()
    training.train_update(first.pk, run=FakeRun(), push=FakePush())
    TrainingUpdate.objects.filter(pk=first.pk).update(
        created_at=first.created_at - timedelta(minutes=30)
    )
    _aged(user_samples(alice, 2), 20 / 60)  # 20 minutes: past the 10-minute bound
    _aged(user_samples(bob, 2), 1 / 60)
    (update,) = claiming.training_updates_queue()
    assert update.owner == alice
