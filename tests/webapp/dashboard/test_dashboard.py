"""The staff dashboard: who sees it, its chart data against the database, queue depths read
from the real Redis broker, and the SVG it draws."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import redis
from django.urls import reverse
from django.utils import timezone

from tests.webapp.dashboard.conftest import judged, sampled, trained_update, turn
from webapp.chat.models import Feedback
from webapp.dashboard import selectors
from webapp.dashboard.charts import Series, bar_chart, line_chart
from webapp.dashboard.queues import queue_depths, redis_url_from_broker
from webapp.learning.models import Judgement, PolicyVersion, TrainingUpdate

pytestmark = [pytest.mark.django_db, pytest.mark.services]

URLS = ["dashboard:index", "dashboard:panel", "dashboard:data"]


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.mark.parametrize("name", URLS)
def test_other_users_get_a_404_and_anonymous_visitors_the_login(client, alice, name) -> None:
    anonymous = client.get(reverse(name))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    client.force_login(alice)
    assert client.get(reverse(name)).status_code == 404


def test_the_page_shows_the_numbers_and_polls_for_updates(staff_client, chain) -> None:
    page = staff_client.get(reverse("dashboard:index")).content.decode()
    assert 'hx-get="/dashboard/panel/"' in page and 'hx-trigger="every 5s"' in page
    assert "vendor/htmx.min.js" in page and "cdn" not in page.lower()
    assert page.count('<svg class="chart"') == 7
    assert "Live version" in page and "Samples waiting" in page and "Queues" in page
    panel = staff_client.get(reverse("dashboard:panel")).content.decode()
    assert panel.lstrip().startswith('<div id="dashboard-panel"') and "<html" not in panel


def test_staff_see_the_dashboard_link_and_others_only_my_data(client, staff, alice) -> None:
    client.force_login(alice)
    page = client.get(reverse("privacy:my_data")).content.decode()
    assert reverse("dashboard:index") not in page and reverse("privacy:my_data") in page
    client.force_login(staff)
    assert reverse("dashboard:index") in client.get(reverse("privacy:my_data")).content.decode()


def _at(row, when) -> None:
    type(row).objects.filter(pk=row.pk).update(created_at=when)


def test_chart_data_matches_the_database(staff_client, alice, monkeypatch) -> None:
    now = timezone.now()
    scores = [1, -1, 1, 1, 0, 1, -1, 1]
    judgements = []
    for i, score in enumerate(scores):
        answer = turn(alice, title=f"t{i}", question=f"q{i}")
        judgement = judged(answer, score=score)
        _at(judgement, now - timedelta(minutes=len(scores) - i))
        judgements.append(judgement)
        if i < 3:
            sampled(judgement)
        # Feedback spread over two days (today and three days ago); one old one out of range.
        feedback = Feedback.objects.create(
            message=answer,
            author=alice,
            rating=[1, -1, 0][i % 3],
            comment="because" if i % 2 else "",
        )
        _at(feedback, now - timedelta(days=3 if i < 4 else 0))
    old = Feedback.objects.create(message=turn(alice, title="old"), author=alice, rating=1)
    _at(old, now - timedelta(days=45))
    first = trained_update(1)
    second = trained_update(
        2,
        metrics=[
            {"step": 0, "loss": 1.0, "kl": 0.02, "clip_fraction": 0.5},
            {"step": 1, "loss": 2.0, "kl": 0.04, "clip_fraction": None},
        ],
    )
    empty = trained_update(3, metrics=[])
    # only v2 records its distance from the base (v1 and v3 as versions from before it was)
    second.produced_version.probe_metrics["probe_kl_base"] = 0.3
    second.produced_version.save(update_fields=["probe_metrics"])
    monkeypatch.setattr(selectors, "reward_series", _with_window(selectors.reward_series, 3))

    data = staff_client.get(reverse("dashboard:data")).json()

    # Reward: every judgement's score, oldest first, with a trailing mean over 3.
    assert data["reward"]["window"] == 3
    points = data["reward"]["points"]
    ordered = sorted(Judgement.objects.all(), key=lambda j: j.created_at)
    assert [p["judgement_id"] for p in points] == [j.pk for j in ordered]
    assert [p["score"] for p in points] == scores
    expected = [sum(scores[max(0, i - 2) : i + 1]) / min(i + 1, 3) for i in range(len(scores))]
    assert [p["moving_average"] for p in points] == pytest.approx(expected)

    # Feedback per day: counted from the rows, the 45-day-old one left out.
    by_day: dict[str, dict[str, int]] = {}
    for f in Feedback.objects.filter(created_at__gte=now - timedelta(days=30)):
        day = by_day.setdefault(
            f.created_at.date().isoformat(), {"up": 0, "down": 0, "comments": 0}
        )
        day["up"] += f.rating == 1
        day["down"] += f.rating == -1
        day["comments"] += bool(f.comment or f.correction)
    assert {
        d["day"]: {k: d[k] for k in ("up", "down", "comments")} for d in data["feedback_per_day"]
    } == by_day
    assert len(data["feedback_per_day"]) == 2
    assert sum(d["up"] for d in data["feedback_per_day"]) == 3

    # Updates: mean over steps; the update without steps is not drawn; KL None when off.
    assert [u["update_id"] for u in data["updates"]] == [first.pk, second.pk]
    assert empty.pk not in [u["update_id"] for u in data["updates"]]
    one, two = data["updates"]
    assert one["loss"] == pytest.approx(0.4) and one["clip_fraction"] == pytest.approx(0.2)
    assert one["kl"] is None and one["steps"] == 2 and one["produced_version"] == 1
    assert two["loss"] == pytest.approx(1.5) and two["kl"] == pytest.approx(0.03)
    assert two["clip_fraction"] == pytest.approx(0.5)

    # Versions: each one's probe metrics, by number.
    versions = list(PolicyVersion.objects.order_by("number"))
    assert [v["number"] for v in data["versions"]] == [v.number for v in versions]
    assert [v["probe_ppl"] for v in data["versions"]] == [
        v.probe_metrics.get("probe_ppl") for v in versions
    ]
    # the step the gate limits and the distance from the base, apart; missing ones are None
    assert [v["probe_kl"] for v in data["versions"]] == [None, 0.01, 0.02, 0.03]
    assert [v["probe_kl_base"] for v in data["versions"]] == [None, None, 0.3, None]
    panel = staff_client.get(reverse("dashboard:panel")).content.decode()
    assert "its step (gated) and its distance from the base" in panel
    assert "from the base v2: 0.3</title>" in panel and "step (KL to its parent) v3" in panel

    assert data["live_version"]["number"] == 0
    assert data["samples_ready"] == 3
    assert set(data["queues"]) == {"judge", "train"}


def _with_window(fn, window: int):
    return lambda **kw: fn(**{"window": window, **kw})


def test_the_live_version_follows_publishing(staff_client, chain) -> None:
    PolicyVersion.objects.filter(number=0).update(status="retired")
    PolicyVersion.objects.filter(pk=chain.version.pk).update(
        status="live", published_at=timezone.now()
    )
    data = staff_client.get(reverse("dashboard:data")).json()
    assert data["live_version"]["label"] == "v1"
    assert data["live_version"]["probe_ppl"] == pytest.approx(11.0)


@pytest.mark.redis
def test_queue_depths_are_read_from_the_real_broker(settings, staff_client, monkeypatch) -> None:
    url = redis_url_from_broker(settings.CELERY_BROKER_URL)
    assert url is not None, "the tests run against the embedded or configured Redis"
    names = (f"test-judge-{uuid.uuid4().hex}", f"test-train-{uuid.uuid4().hex}")
    client = redis.Redis.from_url(url)
    try:
        client.rpush(names[0], "a", "b", "c")
        client.rpush(f"{names[0]}\x06\x163", "high priority")
        client.rpush(names[1], "d")
        assert queue_depths(broker_url=settings.CELERY_BROKER_URL, names=names) == {
            names[0]: 4,
            names[1]: 1,
        }
        monkeypatch.setattr(selectors, "QUEUES", names)
        data = staff_client.get(reverse("dashboard:data")).json()
        assert data["queues"] == {names[0]: 4, names[1]: 1}
    finally:
        client.delete(names[0], f"{names[0]}\x06\x163", names[1])
        client.close()


def test_an_unreachable_or_foreign_broker_gives_unknown_depths(tmp_path) -> None:
    missing = f"redis+socket://{tmp_path}/nothing.sock"
    assert queue_depths(broker_url=missing, names=["judge"]) == {"judge": None}
    assert queue_depths(broker_url="amqp://guest@localhost//", names=["judge"]) == {"judge": None}
    assert queue_depths(broker_url="", names=["train"]) == {"train": None}


def test_broker_urls_become_redis_py_urls() -> None:
    assert redis_url_from_broker("redis+socket:///v/r.sock") == "unix:///v/r.sock"
    assert (
        redis_url_from_broker("redis+socket:///v/r.sock?virtual_host=3") == "unix:///v/r.sock?db=3"
    )
    assert redis_url_from_broker("rediss://h:6380/1") == "rediss://h:6380/1"


def test_moving_average_is_a_trailing_mean() -> None:
    assert selectors.moving_average([1, -1, 1, 1, 0], 2) == [1.0, 0.0, 0.0, 1.0, 0.5]
    assert selectors.moving_average([], 5) == []


def test_line_chart_draws_each_series_and_breaks_at_gaps() -> None:
    svg = str(
        line_chart(
            "Loss <b>", [Series("loss", [1.0, None, 3.0, 2.0], "#123")], ["a", "b", "c", "d"]
        )
    )
    assert svg.startswith('<svg class="chart"') and svg.endswith("</svg>")
    assert "Loss &lt;b&gt;" in svg and "<b>" not in svg
    path = svg.split('<path d="')[1].split('"')[0]
    assert path.count("M") == 2 and path.count("L") == 1  # the gap lifts the pen
    assert svg.count("<circle") == 3 and "loss c: 3" in svg


def test_bar_chart_draws_one_bar_per_value_and_empty_charts_say_so() -> None:
    svg = str(
        bar_chart(
            "Feedback",
            [Series("up", [2, 0], "#0a0"), Series("down", [1, 3], "#a00")],
            ["2025-01-01", "2025-01-02"],
        )
    )
    assert svg.count("<rect") == 4 + 2  # four bars, two legend swatches
    assert "2025-01-02 down: 3" in svg
    assert "no data yet" in str(line_chart("Reward", [Series("r", [], "#000")], []))
    assert "no data yet" in str(bar_chart("Feedback", [Series("up", [], "#000")], []))


def test_the_user_filter_narrows_every_view_to_one_lineage(staff_client, alice, bob) -> None:
    mine, theirs = turn(alice, title="Alice's"), turn(bob, title="Bob's")
    my_judgement, their_judgement = judged(mine), judged(theirs, score=-1)
    sampled(my_judgement)
    sampled(their_judgement)
    Feedback.objects.create(message=mine, author=alice, rating=1)
    Feedback.objects.create(message=theirs, author=bob, rating=-1)
    own = PolicyVersion.objects.create(
        number=4, owner=alice, status="live", probe_metrics={"probe_ppl": 12.5}
    )
    TrainingUpdate.objects.create(
        algorithm="rl", owner=alice, produced_version=own, metrics=[{"step": 0, "loss": 0.5}]
    )
    TrainingUpdate.objects.create(algorithm="rl", owner=bob, metrics=[{"step": 0, "loss": 0.9}])

    everyone = staff_client.get(reverse("dashboard:data")).json()
    assert everyone["user"] is None and everyone["live_version"]["label"] == "v0"
    assert everyone["samples_ready"] == 2 and len(everyone["updates"]) == 2

    data = staff_client.get(reverse("dashboard:data"), {"user": "alice"}).json()
    assert data["user"] == "alice"
    assert data["live_version"] | {"published_at": None} == {
        "number": 4,
        "label": "v4",
        "owner": "alice",
        "published_at": None,
        "probe_kl": None,
        "probe_kl_base": None,
        "probe_ppl": 12.5,
    }
    assert data["samples_ready"] == 1
    assert [p["judgement_id"] for p in data["reward"]["points"]] == [my_judgement.pk]
    assert [(d["up"], d["down"]) for d in data["feedback_per_day"]] == [(1, 0)]
    assert [u["produced_version"] for u in data["updates"]] == [4]
    assert [(v["label"], v["owner"]) for v in data["versions"]] == [("v4", "alice")]

    page = staff_client.get(reverse("dashboard:index"), {"user": "alice"}).content.decode()
    assert 'hx-get="/dashboard/panel/?user=alice"' in page
    assert '<option value="alice" selected>' in page and '<option value="bob">' in page
    assert "alice's own" in page
    panel = staff_client.get(reverse("dashboard:panel"), {"user": "bob"}).content.decode()
    assert "bob has none of their own: the shared one" in panel
    assert staff_client.get(reverse("dashboard:data"), {"user": "nobody"}).status_code == 404
