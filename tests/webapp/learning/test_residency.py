"""Unloading retired versions: the sweep drops from each replica the versions past the grace
and keeps the live ones and those still writing an answer (replicas faked as callables)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import AnswerFactory, QuestionFactory, UserFactory
from tests.webapp.learning.updates import FakePush
from trainer.publish import ReplicaUnreachable
from webapp.chat.services import assistant_message_start
from webapp.learning.models import PolicyVersion
from webapp.learning.workflows.publishing import policy_lineage_reset, policy_version_publish
from webapp.learning.workflows.residency import adapters_unload_retired, version_number

pytestmark = [pytest.mark.django_db, pytest.mark.services, pytest.mark.usefixtures("no_broker")]

GRACE_S = 600
A, B = "http://a:1/v1", "http://b:2/v1"


class FakeReplicas:
    """What each replica holds; the replicas in ``down`` cannot be asked."""

    def __init__(self, held: dict[str, set[str]]) -> None:
        self.held = held
        self.down: set[str] = set()
        self.unloads: list[tuple[str, str]] = []

    def loaded(self, replica: str) -> list[str]:
        if replica in self.down:
            raise ReplicaUnreachable(replica, "connection refused")
        return sorted(self.held[replica])

    def unload(self, replica: str, name: str) -> None:
        self.unloads.append((replica, name))
        self.held[replica].discard(name)

    def sweep(self, **kw) -> dict[str, list[str]]:
        return adapters_unload_retired(loaded=self.loaded, unload=self.unload, **kw)


@pytest.fixture(autouse=True)
def two_replicas(settings) -> None:
    settings.VLLM_BASE_URLS = [A, B]
    settings.ADAPTER_UNLOAD_GRACE_S = GRACE_S


def publish_versions(tmp_path, owner, numbers: list[int]) -> list[PolicyVersion]:
    """Publish ``numbers`` one after another in ``owner``'s lineage (the last stays live)."""
    versions = []
    for number in numbers:
        version = PolicyVersion.objects.create(
            number=number, owner=owner, adapter_path=str(tmp_path / f"v{number}")
        )
        versions.append(policy_version_publish(version=version, push=FakePush()))
    return versions


def retired_long_ago(*versions: PolicyVersion) -> None:
    past = timezone.now() - timedelta(seconds=GRACE_S + 5)
    PolicyVersion.objects.filter(pk__in=[v.pk for v in versions]).update(retired_at=past)


def test_versions_retired_past_the_grace_go_and_the_live_one_stays(tmp_path) -> None:
    v1, _, _ = publish_versions(tmp_path, UserFactory(), [1, 2, 3])
    retired_long_ago(v1)  # v2 retired as v3 went live: within the grace
    fake = FakeReplicas({A: {"parley-v1", "parley-v2", "parley-v3"}, B: {"parley-v1"}})
    assert fake.sweep() == {A: ["parley-v1"], B: ["parley-v1"]}
    assert fake.held == {A: {"parley-v2", "parley-v3"}, B: set()}
    later = timezone.now() + timedelta(seconds=GRACE_S + 1)
    assert fake.sweep(now=later) == {A: ["parley-v2"], B: []}
    assert fake.held == {A: {"parley-v3"}, B: set()}


def test_a_version_still_writing_an_answer_stays_until_it_is_finished(tmp_path) -> None:
    v1, _ = publish_versions(tmp_path, owner := UserFactory(), [1, 2])
    question = QuestionFactory(conversation__owner=owner)
    writing = assistant_message_start(
        conversation=question.conversation,
        parent=question,
        policy_version=v1,
        served_model="parley-v1",
        sampling_params={},
    )
    retired_long_ago(v1)
    fake = FakeReplicas({A: {"parley-v1", "parley-v2"}, B: set()})
    assert fake.sweep() == {A: [], B: []}
    writing.status = "complete"
    writing.save(update_fields=["status"])
    assert fake.sweep() == {A: ["parley-v1"], B: []}


def test_an_answer_left_unfinished_by_a_crashed_process_holds_nothing_past_the_grace(
    tmp_path,
) -> None:
    owner = UserFactory()
    v1, _ = publish_versions(tmp_path, owner, [1, 2])
    answer = AnswerFactory(parent__conversation__owner=owner, policy_version=v1, status="streaming")
    answer.__class__.objects.filter(pk=answer.pk).update(
        created_at=timezone.now() - timedelta(seconds=GRACE_S + 5)
    )
    retired_long_ago(v1)
    fake = FakeReplicas({A: {"parley-v1"}, B: set()})
    assert fake.sweep() == {A: ["parley-v1"], B: []}


def test_a_reset_or_deleted_lineage_goes_and_names_that_are_no_version_stay(tmp_path) -> None:
    owner = UserFactory()
    (v1,) = publish_versions(tmp_path, owner, [1])
    assert policy_lineage_reset(owner_id=owner.pk) == v1
    assert PolicyVersion.objects.get(pk=v1.pk).retired_at is not None
    retired_long_ago(v1)
    held = {"parley-v1", "parley-v99", "base", "someone-elses-adapter"}  # v99: no such version
    fake = FakeReplicas({A: set(held), B: set()})
    assert fake.sweep() == {A: ["parley-v1", "parley-v99"], B: []}
    assert fake.held[A] == {"base", "someone-elses-adapter"}


def test_a_candidate_being_published_stays(tmp_path) -> None:
    PolicyVersion.objects.create(number=4, adapter_path=str(tmp_path), status="candidate")
    fake = FakeReplicas({A: {"parley-v4"}, B: set()})
    assert fake.sweep() == {A: [], B: []}


def test_a_replica_that_cannot_be_asked_is_left_for_the_next_sweep(tmp_path) -> None:
    v1, _ = publish_versions(tmp_path, UserFactory(), [1, 2])
    retired_long_ago(v1)
    fake = FakeReplicas({A: {"parley-v1"}, B: {"parley-v1"}})
    fake.down = {A}
    assert fake.sweep() == {B: ["parley-v1"]}
    fake.down = set()
    assert fake.sweep() == {A: ["parley-v1"], B: []}


def test_with_no_grace_a_version_goes_as_soon_as_it_is_retired(settings, tmp_path) -> None:
    settings.ADAPTER_UNLOAD_GRACE_S = 0
    publish_versions(tmp_path, UserFactory(), [1, 2])
    fake = FakeReplicas({A: {"parley-v1", "parley-v2"}, B: set()})
    assert fake.sweep() == {A: ["parley-v1"], B: []}


def test_only_names_of_this_model_id_are_versions() -> None:
    assert version_number("parley-v12", model_id="parley") == 12
    assert version_number("parley-v12x", model_id="parley") is None
    assert version_number("other-v3", model_id="parley") is None
    assert version_number("p.rley-v3", model_id="p.rley") == 3
    assert version_number("pxrley-v3", model_id="p.rley") is None
