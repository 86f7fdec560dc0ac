"""Personal lineages (PARLEY_LEARNING_SCOPE=user): whose feedback trains which adapter, in
what order users' updates run, and the shared scope's one lineage."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import AnswerFactory
from tests.webapp.learning.updates import user_samples
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.preferences import learning_pause_set
from webapp.learning.selectors import policy_version_for, policy_version_live
from webapp.learning.workflows import claiming
from webapp.learning.workflows.publishing import policy_version_publish
from webapp.learning.workflows.training import TrainJob, TrainResult, train_update

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture(autouse=True)
def user_scope(settings, tmp_path):
    settings.LEARNING_SCOPE = "user"
    settings.ADAPTERS_DIR = tmp_path
    settings.TRAIN_MAX_WAIT_S = 3600


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """Tasks are not sent anywhere: each test drives the queue itself."""
    monkeypatch.setattr("webapp.core.outbox.send", lambda task, args: None)


class FakePush(list):
    """An adapter push that records each adapter name and loads nothing."""

    def __call__(self, adapter_dir, *, lora_name, serving_urls, timeout=30.0, api_key=""):
        self.append(lora_name)
        return [{"replica": u, "status": 200} for u in serving_urls]


class FakeRun:
    """A trainer that writes an empty adapter and passes the gate; keeps every job it got."""

    def __init__(self) -> None:
        self.jobs: list[TrainJob] = []

    def __call__(self, job: TrainJob, *, record_step) -> TrainResult:
        self.jobs.append(job)
        job.out_dir.mkdir(parents=True)
        (job.out_dir / "adapter_config.json").write_text("{}")
        return TrainResult(
            summary={"loss": 0.4, "done": True},
            probe={"probe_kl": 0.01, "probe_ppl": 10.0},
            base_probe={"probe_ppl": 9.9},
            passed=True,
            reasons=[],
        )


def _train_next(run: FakeRun, push: FakePush, *, force: bool = False) -> TrainingUpdate:
    update = claiming.training_update_maybe_queue(force=force)
    assert update is not None
    train_update(update.pk, run=run, push=push)
    update.refresh_from_db()
    return update


def _ids(samples: list[Sample]) -> list[int]:
    return [sample.pk for sample in samples]


def test_a_users_feedback_trains_only_their_own_lineage(settings, alice, bob) -> None:
    settings.TRAIN_BATCH_SIZE = 2
    alices, bobs = user_samples(alice, 2), user_samples(bob, 2)
    run, push = FakeRun(), FakePush()

    first = _train_next(run, push)
    assert first.owner == alice and first.summary["sample_ids"] == _ids(alices)
    assert set(first.summary["holdout_ids"]).isdisjoint(_ids(bobs))  # gated on her feedback
    mine = first.produced_version
    assert (mine.owner, mine.status, mine.parent.number) == (alice, "live", 0)
    assert policy_version_for(user=alice) == mine
    assert policy_version_for(user=bob).number == 0  # bob still gets the shared base
    assert policy_version_live().number == 0  # and so does the shared lineage
    assert Sample.objects.filter(pk__in=_ids(bobs), status="ready").count() == 2

    second = _train_next(run, push)
    assert second.owner == bob and second.summary["sample_ids"] == _ids(bobs)
    # Bob's update starts from the shared base, not from alice's adapter.
    assert second.base_version.number == 0 and run.jobs[1].init_adapter_dir is None
    theirs = second.produced_version
    assert theirs.owner == bob and policy_version_for(user=bob) == theirs
    assert policy_version_for(user=alice) == mine  # publishing bob's left alice's live
    assert push == [f"parley-v{mine.number}", f"parley-v{theirs.number}"]


def test_a_new_user_starts_from_the_shared_live_version_then_from_their_own(
    settings, alice
) -> None:
    settings.TRAIN_BATCH_SIZE = 1
    shared_dir = settings.ADAPTERS_DIR / "shared"
    shared_dir.mkdir()
    shared = PolicyVersion.objects.create(number=1, adapter_path=str(shared_dir))
    policy_version_publish(version=shared, push=FakePush())
    run, push = FakeRun(), FakePush()

    user_samples(alice, 1)
    first = _train_next(run, push)
    assert first.base_version == shared and run.jobs[0].init_adapter_dir == str(shared_dir)
    own = first.produced_version
    assert own.owner == alice and own.parent == shared

    user_samples(alice, 1)
    second = _train_next(run, push)
    assert second.base_version == own and run.jobs[1].init_adapter_dir == own.adapter_path
    assert policy_version_live() == shared  # her updates never moved the shared lineage


def test_the_batch_threshold_is_per_user(settings, alice, bob) -> None:
    settings.TRAIN_BATCH_SIZE = 3
    user_samples(alice, 2)
    user_samples(bob, 2)
    assert claiming.training_update_maybe_queue() is None  # four ready, but nobody has three
    user_samples(bob, 1)
    update = claiming.training_update_maybe_queue()
    assert update is not None and update.owner == bob


@pytest.mark.parametrize("scope", ["user", "shared"])
def test_answers_without_feedback_alone_train_no_version(settings, alice, scope) -> None:
    # Conversations closed without feedback leave reward-0 samples (seen on a fresh install:
    # a user who only asked questions got an update with loss 0 and a version of their own).
    settings.LEARNING_SCOPE = scope
    settings.TRAIN_BATCH_SIZE = 3
    user_samples(alice, 5, reward=0.0)
    assert claiming.training_update_maybe_queue() is None
    assert claiming.training_update_maybe_queue(force=True) is None
    user_samples(alice, 1, reward=-1.0)  # one 👎: something to learn, not yet a batch of it
    assert claiming.training_update_maybe_queue() is None
    disliked = user_samples(alice, 2, reward=-1.0)
    update = claiming.training_update_maybe_queue()
    assert update is not None
    claimed = claiming.training_update_claim(update_id=update.pk)
    assert set(_ids(disliked)) <= set(claimed.summary["sample_ids"])  # feedback first


def test_the_wait_trigger_is_per_user(settings, alice, bob) -> None:
    settings.TRAIN_BATCH_SIZE = 8
    user_samples(alice, 1)
    waited = user_samples(bob, 1)
    Sample.objects.filter(pk__in=_ids(waited)).update(
        created_at=waited[0].created_at - timedelta(hours=2)
    )
    update = claiming.training_update_maybe_queue()
    assert update is not None and update.owner == bob


def test_users_with_ready_batches_take_turns(settings, alice, bob) -> None:
    """Alice floods feedback; bob's one batch still goes next after one update of hers."""
    settings.TRAIN_BATCH_SIZE = 2
    user_samples(alice, 10)
    user_samples(bob, 2)
    run, push = FakeRun(), FakePush()
    owners = [_train_next(run, push).owner for _ in range(4)]
    # Both never trained: alice's samples are older, so she goes first; then bob, whose
    # feedback has waited since before her update, while hers waits only from her update on;
    # then alice alone.
    assert owners == [alice, bob, alice, alice]
    assert Sample.objects.filter(message__conversation__owner=bob, status="ready").count() == 0
    user_samples(bob, 2)
    # Her feedback waits from her last update, before his new feedback came: she goes, then he.
    assert [_train_next(run, push).owner for _ in range(2)] == [alice, bob]


def test_one_update_at_a_time_across_users(settings, alice, bob) -> None:
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_WORKERS, settings.TRAIN_PEOPLE_PER_STEP = 1, 1, 1
    user_samples(alice, 1)
    user_samples(bob, 1)
    first = claiming.training_update_maybe_queue()
    assert first is not None
    assert claiming.training_update_maybe_queue() is None  # bob waits for alice's to finish


def test_rollback_is_per_lineage(settings, alice, bob) -> None:
    settings.TRAIN_BATCH_SIZE = 1
    run, push = FakeRun(), FakePush()
    user_samples(alice, 1)
    alice_first = _train_next(run, push).produced_version
    user_samples(bob, 1)
    bob_first = _train_next(run, push).produced_version
    user_samples(alice, 1)
    alice_second = _train_next(run, push).produced_version
    assert policy_version_for(user=alice) == alice_second

    policy_version_publish(version=alice_first, push=push)
    assert policy_version_for(user=alice) == alice_first
    alice_second.refresh_from_db()
    assert alice_second.status == "retired"
    bob_first.refresh_from_db()
    assert bob_first.status == "live" and policy_version_for(user=bob) == bob_first
    assert PolicyVersion.objects.get(number=0).status == "live"  # the shared lineage's


def test_shared_scope_trains_one_lineage_on_everyones_feedback(settings, alice, bob) -> None:
    settings.LEARNING_SCOPE = "shared"
    settings.TRAIN_BATCH_SIZE = 4
    samples = user_samples(alice, 2) + user_samples(bob, 2)
    update = _train_next(FakeRun(), FakePush())
    # four ready: too few to leave any fresh (PARLEY_GATE_FRESH_SAMPLES needs four times as many)
    assert update.owner is None and sorted(update.summary["sample_ids"]) == sorted(_ids(samples))
    assert update.summary["fresh_ids"] == []
    version = update.produced_version
    assert version.owner is None and policy_version_live() == version
    assert policy_version_for(user=alice) == version == policy_version_for(user=bob)


def test_an_answers_age_counts_only_versions_of_its_owners_lineage(settings, alice, bob) -> None:
    """Answers from more than PARLEY_SAMPLE_MAX_VERSION_LAG versions back are not trained on;
    other users' versions (numbered in between) do not make alice's answers old."""
    from webapp.learning.services import ineligibility

    settings.SAMPLE_MAX_VERSION_LAG, settings.TRAIN_BATCH_SIZE = 1, 1
    answer = AnswerFactory(parent__conversation__owner=alice)  # served by the shared base
    run, push = FakeRun(), FakePush()
    for _ in range(3):
        user_samples(bob, 1)
        _train_next(run, push)
    assert policy_version_for(user=bob).number == 3
    assert ineligibility(message=answer) is None
    for _ in range(2):
        user_samples(alice, 1)
        _train_next(run, push)
    assert policy_version_for(user=alice).number == 5
    assert "more than 1 behind" in ineligibility(message=answer)


def test_resetting_a_lineage_goes_back_to_the_shared_version_and_trains_from_it(
    settings, alice, bob
) -> None:
    from webapp.learning.workflows.publishing import policy_lineage_reset

    settings.TRAIN_BATCH_SIZE = 1
    run, push = FakeRun(), FakePush()
    user_samples(alice, 1)
    first = _train_next(run, push).produced_version
    user_samples(bob, 1)
    bobs = _train_next(run, push).produced_version

    assert policy_lineage_reset(owner_id=alice.pk) == first
    first.refresh_from_db()
    assert first.status == "rolled_back" and policy_version_for(user=alice).number == 0
    assert policy_version_for(user=bob) == bobs  # bob's lineage is not touched
    assert policy_lineage_reset(owner_id=alice.pk) is None  # nothing live to reset

    user_samples(alice, 1)
    again = _train_next(run, push)
    assert again.base_version.number == 0 and run.jobs[-1].init_adapter_dir is None
    assert policy_version_for(user=alice) == again.produced_version


def test_a_paused_users_samples_are_recorded_but_not_trained(settings, alice, bob) -> None:
    settings.TRAIN_BATCH_SIZE = 2
    learning_pause_set(user=alice, paused=True)
    alices = user_samples(alice, 4)
    assert claiming.training_update_maybe_queue(force=True) is None  # only hers are ready
    bobs = user_samples(bob, 2)
    run, push = FakeRun(), FakePush()
    update = _train_next(run, push)
    assert update.owner == bob and update.summary["sample_ids"] == _ids(bobs)
    assert Sample.objects.filter(pk__in=_ids(alices), status="ready").count() == 4

    learning_pause_set(user=alice, paused=False)
    resumed = _train_next(run, push)
    assert resumed.owner == alice and resumed.summary["sample_ids"] == _ids(alices)[:2]


def test_an_update_queued_before_its_owner_paused_trains_nothing(settings, alice) -> None:
    settings.TRAIN_BATCH_SIZE = 1
    samples = user_samples(alice, 1)
    update = claiming.training_update_maybe_queue()
    assert update is not None and update.owner == alice
    learning_pause_set(user=alice, paused=True)
    run = FakeRun()
    assert train_update(update.pk, run=run, push=FakePush()) is None
    update.refresh_from_db()
    assert update.status == "failed" and "paused" in update.error and run.jobs == []
    assert Sample.objects.get(pk=samples[0].pk).status == "ready"


def test_in_shared_scope_a_paused_users_samples_stay_out_of_the_shared_batch(
    settings, alice, bob
) -> None:
    settings.LEARNING_SCOPE = "shared"
    settings.TRAIN_BATCH_SIZE = 4
    learning_pause_set(user=alice, paused=True)
    alices, bobs = user_samples(alice, 2), user_samples(bob, 2)
    update = _train_next(FakeRun(), FakePush(), force=True)
    assert update.owner is None and update.summary["sample_ids"] == _ids(bobs)
    assert Sample.objects.filter(pk__in=_ids(alices), status="ready").count() == 2
