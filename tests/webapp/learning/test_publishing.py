"""Finish and publish: samples consumed exactly once, candidates recorded, published where the
lineage is served, rollback, and a dead worker's version published on redelivery."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tests.webapp.learning.updates import FakePush, ready_samples
from trainer.publish import PublishError, ReplicaUnreachable
from webapp import replicas
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live
from webapp.learning.workflows import claiming, publishing
from webapp.learning.workflows.publishing import PublishFailed, policy_version_publish
from webapp.replicas import DownReplicas, rendezvous_order

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.usefixtures("no_broker")]

THREE = ["http://a:1/v1", "http://b:2/v1", "http://c:3/v1"]


@pytest.fixture(autouse=True)
def nothing_down(monkeypatch) -> DownReplicas:
    fresh = DownReplicas(for_s=replicas.DOWN_FOR_S)
    monkeypatch.setattr(replicas, "down", fresh)
    return fresh


class DownPush(FakePush):
    """Records the loads of the replicas that answer; the ones in ``down`` do not."""

    def __init__(self, down: set[str]) -> None:
        super().__init__()
        self.down = down

    def __call__(self, adapter_dir, *, lora_name, serving_urls, timeout=30.0, api_key=""):
        for url in serving_urls:
            if url in self.down:
                raise ReplicaUnreachable(url, "connection refused")
        return super().__call__(
            adapter_dir, lora_name=lora_name, serving_urls=serving_urls, api_key=api_key
        )


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


def test_the_shared_lineage_loads_into_every_replica_then_goes_live_and_rollback_is_the_same(
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
    assert [c["name"] for c in pushed] == ["parley-v1"] * 2 + ["parley-v2"] * 2
    assert [c["urls"] for c in pushed[:2]] == [["http://a:1/v1"], ["http://b:2/v1"]]
    assert pushed[0]["key"] == settings.VLLM_API_KEY  # vLLM refuses adapter loads without it
    assert policy_version_live() == v2
    policy_version_publish(version=v1, push=pushed)  # rollback
    assert policy_version_live() == v1
    retired = PolicyVersion.objects.get(pk=v2.pk)
    assert retired.status == "retired" and retired.retired_at is not None
    assert PolicyVersion.objects.get(pk=v1.pk).retired_at is None
    assert PolicyVersion.objects.filter(status="live").count() == 1


def test_a_refusing_replica_publishes_nothing(settings, tmp_path) -> None:
    def refuse(*a, **k):
        raise PublishError("http://b:2/v1", "answered 500")

    v1 = PolicyVersion.objects.create(number=1, adapter_path=str(tmp_path), status="candidate")
    with pytest.raises(PublishFailed, match="b:2"):
        policy_version_publish(version=v1, push=refuse)
    assert policy_version_live().number == 0


def _users_version(tmp_path, number: int = 1) -> PolicyVersion:
    return PolicyVersion.objects.create(
        number=number,
        owner=UserFactory(),
        adapter_path=str(tmp_path / f"v{number}"),
        status="candidate",
    )


def test_a_users_version_loads_into_their_home_replica_only(settings, tmp_path, pushed) -> None:
    settings.VLLM_BASE_URLS = THREE
    version = _users_version(tmp_path)
    policy_version_publish(version=version, push=pushed)
    home = rendezvous_order(replicas.lineage_key(version.owner_id), THREE)[0]
    assert [c["urls"] for c in pushed] == [[home]]
    assert policy_version_live(owner_id=version.owner_id) == version


def test_while_the_home_is_down_the_version_loads_where_its_requests_fall_back(
    settings, tmp_path, nothing_down
) -> None:
    settings.VLLM_BASE_URLS = THREE
    version = _users_version(tmp_path)
    order = rendezvous_order(replicas.lineage_key(version.owner_id), THREE)
    push = DownPush(down={order[0]})
    policy_version_publish(version=version, push=push)
    assert [c["urls"] for c in push] == [[order[1]]]
    assert nothing_down.is_down(order[0])
    assert replicas.replica_order(replicas.lineage_key(version.owner_id))[0] == order[1]
    assert PolicyVersion.objects.get(pk=version.pk).status == "live"


def test_with_no_replica_answering_nothing_goes_live(settings, tmp_path) -> None:
    settings.VLLM_BASE_URLS = THREE
    version = _users_version(tmp_path)
    with pytest.raises(PublishFailed, match="no serving replica answered"):
        policy_version_publish(version=version, push=DownPush(down=set(THREE)))
    assert PolicyVersion.objects.get(pk=version.pk).status == "candidate"


def test_a_home_that_refuses_the_adapter_fails_the_publish_with_no_fallback(
    settings, tmp_path
) -> None:
    settings.VLLM_BASE_URLS = THREE
    version = _users_version(tmp_path)
    calls = []

    def refuse(adapter_dir, *, serving_urls, **kw):
        calls.append(serving_urls)
        raise PublishError(serving_urls[0], "answered 400: bad adapter")

    with pytest.raises(PublishFailed, match="bad adapter"):
        policy_version_publish(version=version, push=refuse)
    assert len(calls) == 1 and PolicyVersion.objects.get(pk=version.pk).status == "candidate"


def test_the_shared_lineage_skips_a_replica_that_is_down(settings, tmp_path) -> None:
    settings.VLLM_BASE_URLS = THREE
    version = PolicyVersion.objects.create(number=1, adapter_path=str(tmp_path), status="candidate")
    push = DownPush(down={THREE[1]})
    policy_version_publish(version=version, push=push)
    assert sorted(u for c in push for u in c["urls"]) == [THREE[0], THREE[2]]
    assert policy_version_live() == version
