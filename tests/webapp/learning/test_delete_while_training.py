"""A conversation deleted while an update trains on its samples: the user is told they were not
trained, and that stays true — the update's weights (which saw them) are discarded, never
served, and the other samples go to the next update."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from tests.factories import AnswerFactory, JudgementFactory, SampleFactory
from tests.webapp.learning.updates import FakePush, FakeRun
from webapp.learning.models import Sample, TrainingUpdate
from webapp.learning.selectors import policy_version_live
from webapp.learning.workflows import claiming
from webapp.learning.workflows.training import train_update
from webapp.privacy.services import my_conversation_delete

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture(autouse=True)
def no_broker(recorded_tasks):
    return recorded_tasks


def _sample(owner, question: str) -> Sample:
    answer = AnswerFactory(parent__conversation__owner=owner, parent__content=question)
    judgement = JudgementFactory(message=answer, fingerprint=question)
    return SampleFactory(judgement=judgement, kind="rl", reward=1.0)


class DeletingRun(FakeRun):
    """A trainer during whose run the owner deletes one conversation from "My data"."""

    def __init__(self, conversation) -> None:
        super().__init__()
        self.conversation = conversation
        self.footprints: list = []

    def __call__(self, job, *, record_step):
        owner = self.conversation.owner
        self.footprints.append(
            my_conversation_delete(conversation=self.conversation, actor=owner, via="My data")
        )
        return super().__call__(job, record_step=record_step)


def test_a_delete_during_training_discards_the_update_so_untrained_stays_true(
    settings, tmp_path, alice, bob
) -> None:
    settings.ADAPTERS_DIR, settings.TRAIN_BATCH_SIZE = tmp_path, 3
    mine = _sample(alice, "mine")
    others = [_sample(bob, "q1"), _sample(bob, "q2")]
    update = claiming.training_update_maybe_queue(force=True)
    run, pushed = DeletingRun(mine.message.conversation), FakePush()

    train_update(update.pk, run=run, push=pushed)

    (footprint,) = run.footprints
    assert footprint.trained_samples == 0 and footprint.in_training == 1
    update.refresh_from_db()
    assert update.status == "rejected" and pushed == [] and policy_version_live().number == 0
    assert any("deleted" in reason for reason in update.summary["gate"]["reasons"])
    assert not (tmp_path / f"update-{update.pk}").exists()  # the weights that saw it are gone
    assert update.produced_version.adapter_path == ""
    # The other samples were not consumed by the discarded update: the next one trains them.
    assert set(Sample.objects.filter(status="ready").values_list("pk", flat=True)) == {
        s.pk for s in others
    }
    nxt = claiming.training_update_maybe_queue(force=True)
    assert train_update(nxt.pk, run=FakeRun(), push=pushed) is not None
    assert Sample.objects.filter(status="consumed", update=nxt).count() == 2


def test_my_data_says_which_samples_a_running_update_holds(client, alice) -> None:
    held = _sample(alice, "held")
    TrainingUpdate.objects.create(
        algorithm="rl",
        status="running",
        started_at=timezone.now(),
        summary={"sample_ids": [held.pk]},
    )
    client.force_login(alice)
    listing = client.get(reverse("privacy:my_data")).content.decode()
    assert "1 in the update training now" in listing
    url = reverse("privacy:delete", args=[held.message.conversation_id])
    assert "being trained by an update running now" in client.get(url).content.decode()
    notice = client.post(url, follow=True).content.decode()
    assert "1 sample(s) from it were being trained by an update running now" in notice
    assert "discarded" in notice
    assert get_user_model().objects.filter(pk=alice.pk).exists()
