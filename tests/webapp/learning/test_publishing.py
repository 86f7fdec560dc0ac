"""Finish and publish: samples consumed exactly once, candidates recorded, published on every
replica, rollback, and a dead worker's version published on redelivery."""

from __future__ import annotations

import pytest

from tests.webapp.learning.updates import ready_samples
from trainer.publish import PublishError
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live
from webapp.learning.workflows import claiming, publishing
from webapp.learning.workflows.publishing import PublishFailed, policy_version_publish

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.usefixtures("no_broker")]


def test_samples_are_consumed_exactly_once(settings, tmp_path) -> None:
    settings.TRAIN_BATCH_SIZE = 2
    samples = ready_samples(3)
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
    ready_samples(2)
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
    ready_samples(2)
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
    ready_samples(1)
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
