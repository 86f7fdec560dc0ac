"""Claim and batch: when an update is queued, which samples it trains, leaves fresh and holds
back, and single flight."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.webapp.learning.updates import FakeRun, ready_samples
from trainer.algorithms import ALGORITHMS, SAMPLE_KINDS
from trainer.claim import fresh_choice
from webapp.learning.models import Sample, TrainingUpdate
from webapp.learning.workflows import claiming
from webapp.learning.workflows.training import train_update

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.usefixtures("no_broker")]


def test_an_update_is_queued_only_when_the_batch_is_full(
    settings, no_broker, django_capture_on_commit_callbacks
) -> None:
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 3, 3600
    ready_samples(2)
    assert claiming.training_update_maybe_queue() is None
    ready_samples(1)
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
    thumbs = ready_samples(3)
    assert claiming.training_update_maybe_queue() is None
    hinted, corrected = ready_samples(2)
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


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_the_claim_the_count_and_the_reason_agree_on_every_shape(settings, algorithm) -> None:
    """Each ready sample is either claimable or counted unused with a reason, never both and
    never neither, on the shapes ``services._sample_kind`` stores: a thumb alone (rl), a hint
    alone, a correction alone, a hint with a correction (opd), a hint with a thumb and a
    correction with a thumb (combined)."""
    from webapp.learning.selectors import sample_counts, sample_unused_reason

    settings.TRAIN_ALGORITHM = algorithm
    thumb, hint_only, hint_thumb, corrected, both, corrected_thumb = ready_samples(6)
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
    # Left unused: a lone signal the algorithm does not train, a thumb or a hint.
    chosen = ALGORITHMS[algorithm]
    lone = {thumb.pk: chosen.uses_reward, hint_only.pk: chosen.uses_hint}
    assert unused == {pk for pk, trained in lone.items() if not trained}


def test_rl_leaves_a_hint_only_sample_and_an_emptied_claim_ends_cleanly(settings) -> None:
    """A hint-only OPD sample has no reward for rl to train; and an update whose samples are
    gone when it starts (re-judged, deleted) fails with a reason, not a trainer traceback."""
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 8, 0
    settings.TRAIN_ALGORITHM = "rl"
    [hinted] = ready_samples(1)
    Sample.objects.filter(pk=hinted.pk).update(kind="opd", reward=0.0, hint="Say 'Sure!'.")
    assert not claiming.claimable_samples(algorithm="rl").exists()
    assert claiming.claimable_samples(algorithm="combined").get() == hinted
    assert claiming.training_update_maybe_queue() is None
    [thumb] = ready_samples(1)
    update = claiming.training_update_maybe_queue()
    assert update is not None
    Sample.objects.filter(pk=thumb.pk).delete()
    assert claiming.training_update_claim(update_id=update.pk) is None
    update.refresh_from_db()
    assert update.status == TrainingUpdate.Status.FAILED
    assert update.error.startswith("No ready sample this algorithm trains on")


def test_samples_that_waited_too_long_trigger_a_smaller_update(settings) -> None:
    settings.TRAIN_BATCH_SIZE, settings.TRAIN_MAX_WAIT_S = 8, 0
    ready_samples(1)
    assert claiming.training_update_maybe_queue() is not None


def test_single_flight_one_update_at_a_time(settings) -> None:
    settings.TRAIN_BATCH_SIZE = 1
    ready_samples(3)
    first = claiming.training_update_maybe_queue()
    assert first is not None
    assert claiming.training_update_maybe_queue() is None
    claiming.training_update_claim(update_id=first.pk)
    assert claiming.training_update_maybe_queue() is None


def test_the_newest_feedback_waits_for_the_next_update_and_checks_this_ones_candidate(
    settings, tmp_path, pushed
) -> None:
    """An update leaves its newest signed samples (PARLEY_GATE_FRESH_SAMPLES, at most a quarter
    of the batch) ready for the next one; the gate scores the candidate on them, feedback no
    version has trained on, so what the user says now outranks what they said before."""
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 8
    assert settings.GATE_FRESH_SAMPLES == 2
    samples = ready_samples(8)
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
    later = ready_samples(8)
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
    samples = ready_samples(8)
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
    unrated = ready_samples(12)
    Sample.objects.filter(pk__in=[s.pk for s in unrated]).update(reward=0.0)
    assert claiming.training_update_maybe_queue() is None
    feedback = ready_samples(7)
    assert claiming.training_update_maybe_queue() is None  # 7 with a signal, 19 ready
    feedback += ready_samples(1)
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
    unrated = ready_samples(3)
    Sample.objects.filter(pk__in=[s.pk for s in unrated]).update(
        reward=0.0, created_at=timezone.now() - timedelta(hours=2)
    )
    rated = ready_samples(1)
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
    first_batch = ready_samples(2)
    update = claiming.training_update_maybe_queue(force=True)
    assert train_update(update.pk, run=FakeRun(), push=pushed) == 1
    alice = get_user_model().objects.get(username="alice")
    assert claiming.holdout_ids(exclude=[], owner_id=alice.pk) == []  # v1 fitted them
    second_batch = ready_samples(2)
    update = claiming.training_update_maybe_queue(force=True)
    claimed = claiming.training_update_claim(update_id=update.pk)
    assert claimed.summary["holdout_ids"] == []  # the batch is v2's, the rest v1's own
    assert train_update(update.pk, run=FakeRun(), push=pushed) == 2
    waiting = ready_samples(1)
    held = claiming.holdout_ids(exclude=[], owner_id=alice.pk)
    # newest first: the ready one, then v1's batch; v2's own batch is left out
    assert held == [waiting[0].pk, *sorted((s.pk for s in first_batch), reverse=True)]
    assert not {s.pk for s in second_batch} & set(held)
