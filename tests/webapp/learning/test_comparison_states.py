"""Where the answers to compare after a bare 👎 stand, known from the database: the 👎 waits to
be read, the answers wait for a busy machine (and the page says why), are being written, are
there (shown at once, whatever their job says) or could not be written (and the page says why,
only then). Their task goes to the front of the judge queue on the real Redis broker; open pages
are told when their job changes; a task that was lost is queued again by the sweep. Real
PostgreSQL, the real views; the model stubbed at the one call that samples the answers."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from tests.factories import AnswerFactory
from tests.webapp.learning.test_alternatives import NoModel, _answer, _sampled, queued
from webapp.celery import app
from webapp.chat.feedback import feedback_set
from webapp.chat.models import Message
from webapp.core import outbox
from webapp.core.outbox import Task
from webapp.inference import ServingError, ServingUnavailable
from webapp.learning import alternatives
from webapp.learning.comparisons import comparison_view
from webapp.learning.models import AlternativesJob, Sample
from webapp.learning.workflows.judging import judge_message
from webapp.learning.workflows.recovery import requeue_pending

pytestmark = [pytest.mark.django_db, pytest.mark.services]
__all__ = ["queued"]  # the fixture, shared with test_alternatives

ANSWERS = ["Mushroom risotto.", "Lentil curry.", "Beef stew."]


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="pw-alice-1")


@pytest.fixture
def bob():
    return get_user_model().objects.create_user("bob", password="pw-bob-1")


@pytest.fixture
def model(monkeypatch, queued) -> None:
    async def sample(sample: Sample, n: int):
        return _sampled(ANSWERS)

    monkeypatch.setattr(alternatives, "_sample", sample)


@pytest.fixture
def pages(monkeypatch) -> list[tuple[str, str]]:
    """What was pushed to open pages: (group, html), sent at once instead of after commit."""
    sent: list[tuple[str, str]] = []

    class Layer:
        async def group_send(self, group: str, event: dict) -> None:
            sent.append((group, event["html"]))

    monkeypatch.setattr(alternatives, "get_channel_layer", Layer)
    monkeypatch.setattr(alternatives.transaction, "on_commit", lambda run: run())
    return sent


def _thumbs_down(user, *, read: bool = True) -> Message:
    answer = _answer(user)
    feedback_set(message=answer, author=user, rating=-1)
    if read:
        judge_message(answer.pk, judge=NoModel())
    return answer


def _write(answer: Message) -> list[Message]:
    return alternatives.alternatives_sample(sample_id=Sample.objects.get(message=answer).pk)


def _panel(client, user, answer: Message) -> str:
    client.force_login(user)
    return client.get(reverse("chat:compare", args=[answer.pk])).content.decode()


def test_when_the_thumbs_down_is_not_read_yet_then_the_answers_are_queued_behind_it(
    alice, model, client
) -> None:
    disliked = _thumbs_down(alice, read=False)
    view = comparison_view(disliked=disliked)
    assert (view.state, view.alternatives, view.busy) == ("queued", [], False)
    assert view.since is not None and view.waited_s < 5
    page = _panel(client, alice, disliked)
    assert "on their way" in page and 'hx-trigger="load delay:3s"' in page
    judge_message(disliked.pk, judge=NoModel())  # reading it queues them
    job = AlternativesJob.objects.get(disliked=disliked)
    assert job.status == "queued" and job.sample.message_id == disliked.pk
    assert comparison_view(disliked=disliked).state == "queued"


def test_when_the_machine_is_busy_then_the_page_says_so_and_why_and_keeps_waiting(
    alice, bob, model, client
) -> None:
    earlier = _thumbs_down(bob)  # bob's answers wait ahead of alice's
    being_written = _thumbs_down(bob)
    AlternativesJob.objects.filter(disliked=being_written).update(
        status="writing", started_at=timezone.now()
    )
    chat = AnswerFactory(parent__conversation__owner=bob, content="", status="streaming")
    disliked = _thumbs_down(alice)
    AlternativesJob.objects.filter(disliked=earlier).update(
        queued_at=timezone.now() - timedelta(seconds=50)
    )
    AlternativesJob.objects.filter(disliked=disliked).update(
        queued_at=timezone.now() - timedelta(seconds=40)
    )
    view = comparison_view(disliked=disliked)
    assert (view.state, view.ahead, view.chats, view.busy) == ("queued", 2, 1, True)
    page = _panel(client, alice, disliked)
    assert (
        "The machine is busy (writing other answers for 2 earlier 👎s and writing 1 chat answer)."
        " Other answers to compare with this one will appear here when it is free; waiting 40 s."
    ) in page
    assert 'hx-trigger="load delay:3s"' in page and "could not be written" not in page
    # A chat answer whose writer is long gone is no work of the machine's.
    Message.objects.filter(pk=chat.pk).update(created_at=timezone.now() - timedelta(hours=1))
    assert comparison_view(disliked=disliked).chats == 0


def test_when_the_machine_does_other_background_work_then_the_page_says_that(
    alice, model, client
) -> None:
    disliked = _thumbs_down(alice)
    AlternativesJob.objects.update(queued_at=timezone.now() - timedelta(minutes=3))
    page = _panel(client, alice, disliked)
    assert "The machine is busy (finishing other background work first)" in page
    assert "waiting 3 min" in page


def test_while_the_answers_are_written_the_page_says_so_and_open_pages_are_told(
    alice, model, client, pages, monkeypatch
) -> None:
    disliked = _thumbs_down(alice)
    told_before_asking: list[int] = []

    async def sample(sample: Sample, n: int):
        told_before_asking.append(len(pages))
        return _sampled(ANSWERS)

    monkeypatch.setattr(alternatives, "_sample", sample)
    AlternativesJob.objects.update(status="writing", started_at=timezone.now())
    page = _panel(client, alice, disliked)
    assert "Writing other answers to compare with this one… (started 0 s ago)" in page
    assert 'hx-trigger="load delay:3s"' in page
    AlternativesJob.objects.update(status="queued", started_at=None)
    pages.clear()

    _write(disliked)
    assert told_before_asking == [1]  # "being written" reached the pages first
    job = AlternativesJob.objects.get(disliked=disliked)
    assert (job.status, job.written, job.error) == ("done", 3, "")
    assert job.started_at is not None and job.finished_at >= job.started_at
    # Told twice (writing, written): each time to ask for the comparison again.
    group = f"conversation-{disliked.conversation_id}"
    assert [g for g, _ in pages] == [group, group]
    url = reverse("chat:compare", args=[disliked.pk])
    assert f'hx-get="{url}"' in pages[-1][1] and 'hx-trigger="load"' in pages[-1][1]
    assert f'id="compare-{disliked.pk}" hx-swap-oob="beforeend"' in pages[-1][1]
    page = _panel(client, alice, disliked)
    assert "Is one of them better?" in page and "Lentil curry." in page and "hx-get" not in page


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (ServingUnavailable("connection refused"), "the model server was not answering"),
        (
            ServingError(400, "This model's maximum context length is 2048 tokens"),
            "the model server refused the request: "
            "This model's maximum context length is 2048 tokens",
        ),
    ],
)
def test_when_the_model_fails_then_the_page_says_they_could_not_be_written_and_why(
    alice, queued, client, monkeypatch, failure, reason, django_capture_on_commit_callbacks
) -> None:
    async def down(sample: Sample, n: int):
        raise failure

    monkeypatch.setattr(alternatives, "_sample", down)
    disliked = _thumbs_down(alice)
    assert _write(disliked) == []
    job = AlternativesJob.objects.get(disliked=disliked)
    assert (job.status, job.error) == ("failed", reason)
    view = comparison_view(disliked=disliked)
    assert (view.state, view.error) == ("failed", reason)
    page = html.unescape(_panel(client, alice, disliked))
    assert f"No other answers could be written to compare this one with: {reason}." in page
    assert "hx-get" not in page  # nothing more to wait for
    # A 👎 on another answer to the same message asks for them again.
    sibling = AnswerFactory(parent=disliked.parent, content="Steak again.")
    with django_capture_on_commit_callbacks(execute=True):
        feedback_set(message=sibling, author=alice, rating=-1)
        judge_message(sibling.pk, judge=NoModel())
    assert AlternativesJob.objects.get(disliked=sibling).status == "queued"
    assert comparison_view(disliked=disliked).state == "queued"


def test_when_the_model_writes_nothing_then_that_is_the_reason(alice, queued, monkeypatch):
    async def empty(sample: Sample, n: int):
        return _sampled(["", "", ""])

    monkeypatch.setattr(alternatives, "_sample", empty)
    disliked = _thumbs_down(alice)
    _write(disliked)
    view = comparison_view(disliked=disliked)
    assert (view.state, view.error) == ("failed", "the model wrote nothing")


def test_answers_that_exist_are_shown_whatever_their_job_says(alice, model, client) -> None:
    disliked = _thumbs_down(alice)
    _write(disliked)
    for status in ("queued", "writing", "failed"):  # a stale or redelivered job's word
        AlternativesJob.objects.update(status=status, error="the model server was not answering")
        view = comparison_view(disliked=disliked)
        assert view.state == "ready" and [m.content for m in view.alternatives] == ANSWERS
    AlternativesJob.objects.all().delete()  # written before their job was recorded
    page = _panel(client, alice, disliked)
    assert "Is one of them better?" in page and "Beef stew." in page
    assert "could not be written" not in page and "hx-get" not in page


def test_a_redelivered_task_writes_nothing_twice_and_its_job_stays_done(alice, model) -> None:
    disliked = _thumbs_down(alice)
    assert len(_write(disliked)) == 3
    assert _write(disliked) == []
    job = AlternativesJob.objects.get(disliked=disliked)
    assert (job.status, job.written) == ("done", 3)
    assert Message.objects.filter(turn_type="unseen").count() == 3


def test_a_lost_task_is_queued_again_and_a_dead_writer_is_taken_over(alice, bob, model) -> None:
    lost = _thumbs_down(alice)
    dead_writer = _thumbs_down(bob)
    live_writer = _thumbs_down(alice)
    long_ago = timezone.now() - timedelta(minutes=11)
    AlternativesJob.objects.filter(disliked=lost).update(queued_at=long_ago)
    AlternativesJob.objects.filter(disliked=dead_writer).update(
        status="writing", started_at=long_ago
    )
    AlternativesJob.objects.filter(disliked=live_writer).update(
        status="writing", started_at=timezone.now() - timedelta(minutes=1)
    )
    assert requeue_pending()["alternatives"] == 2
    assert _write(live_writer) == []  # another run is writing them
    assert AlternativesJob.objects.get(disliked=live_writer).status == "writing"
    assert len(_write(dead_writer)) == 3
    assert AlternativesJob.objects.get(disliked=dead_writer).status == "done"


@pytest.fixture
def judge_queue():
    """The judge queue on the test run's real Redis broker, emptied before and after."""

    def drain() -> list[tuple[str, list]]:
        taken = []
        with app.connection_for_read() as connection:
            channel = connection.default_channel
            while (message := channel.basic_get("judge", no_ack=True)) is not None:
                taken.append((message.headers["task"], message.decode()[0]))
        return taken

    drain()
    yield drain
    drain()


def test_the_answers_to_compare_take_the_judge_workers_next_slot(judge_queue) -> None:
    backlog = [
        (Task.SUGGEST_CONVERSATION_TITLE, (1,)),
        (Task.JUDGE_MESSAGE, (2,)),
        (Task.REQUEUE_PENDING, ()),
        (Task.JUDGE_MESSAGE, (3,)),
    ]
    for task, args in backlog:
        assert outbox.send(task, args)
    assert outbox.send(Task.SAMPLE_ALTERNATIVES, (4,))
    assert judge_queue() == [
        (str(Task.SAMPLE_ALTERNATIVES), [4]),  # first, though sent last
        (str(Task.JUDGE_MESSAGE), [2]),  # then judging, in order
        (str(Task.JUDGE_MESSAGE), [3]),
        (str(Task.SUGGEST_CONVERSATION_TITLE), [1]),  # then the rest
        (str(Task.REQUEUE_PENDING), []),
    ]
