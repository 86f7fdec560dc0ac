"""My model in plain words: no jargon on its first screen (the technical side behind "Details"),
and the progress fragment the page and the chat swap in, asking again while something is under
way."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from tests.webapp.dashboard.conftest import judged, sampled, turn
from tests.webapp.dashboard.test_my_model import lineages, user_scope  # noqa: F401
from webapp.learning.models import TrainingUpdate

pytestmark = [pytest.mark.django_db, pytest.mark.services]


JARGON = (
    "adapter",
    "lineage",
    "global name",
    "probe gate",
    "Refused candidates",
    "superseded by judgement",
)


class _FirstScreen(HTMLParser):
    """The text a reader sees without opening "Details": outside every <details> (its
    <summary> is seen), outside scripts and attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.inside: list[str] = []
        self.seen: list[str] = []
        self.hidden: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("details", "summary", "script", "style"):
            self.inside.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("details", "summary", "script", "style") and tag in self.inside:
            while self.inside.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        folded = "details" in self.inside and self.inside[-1] != "summary"
        quiet = "script" in self.inside or "style" in self.inside
        (self.hidden if folded or quiet else self.seen).append(data)


def _first_screen(html: str) -> tuple[str, str]:
    parser = _FirstScreen()
    parser.feed(html)
    return " ".join(parser.seen), " ".join(parser.hidden)


@pytest.fixture
def busy_lineage(alice, request) -> None:
    """Besides ``lineages``: feedback replaced by newer feedback, a sample refused and excluded,
    one waiting, an update training now and one that failed."""
    request.getfixturevalue("lineages")
    answer = turn(alice, title="Rewritten", question="Capital of Spain?")
    old = sampled(judged(answer, fingerprint="old"), status="superseded")
    old.exclusion_reason = "superseded by judgement 59 of the same answer"
    old.save(update_fields=["exclusion_reason"])
    refused = sampled(judged(turn(alice, title="Refused", question="Again?")), status="excluded")
    refused.exclusion_reason = (
        "refused by the probe gate 3 times; last: probe KL to the live version 0.9 exceeds 0.5"
    )
    refused.save(update_fields=["exclusion_reason"])
    waiting = sampled(judged(turn(alice, title="Waiting", question="Later?")))
    TrainingUpdate.objects.create(
        algorithm="combined", owner=alice, status="failed", error="RuntimeError: out of memory"
    )
    TrainingUpdate.objects.create(
        algorithm="combined",
        owner=alice,
        status="running",
        config={"steps_per_batch": 2},
        metrics=[{"step": 0, "loss": 0.5, "tokens_per_second": 40.0}],
        summary={"sample_ids": [waiting.pk]},
    )


def test_my_models_first_screen_keeps_the_jargon_behind_details(
    client, alice, busy_lineage
) -> None:
    client.force_login(alice)
    seen, hidden = _first_screen(client.get(reverse("mymodel:index")).content.decode())
    for word in JARGON:
        assert word.lower() not in seen.lower(), word
    # the technical words are there, behind "Details"
    for word in ("adapter", "lineage", "global name", "probe gate", "Refused candidates"):
        assert word.lower() in hidden.lower(), word
    assert "superseded by judgement 59" in hidden
    # and the first screen says it in words instead
    assert "Training your model now: learning, step 2 of 2." in seen
    assert "replaced by your newer feedback on the same answer" in seen
    assert "being learnt now" in seen  # in the batch of the update training now
    assert "Version 9 was not used: its language got clumsier than the starting model's" in seen
    assert "Version 6 is live" in seen


def test_the_progress_fragment_has_no_jargon_either(client, alice, busy_lineage) -> None:
    client.force_login(alice)
    for query in ("", "?on=chat"):
        html = client.get(reverse("mymodel:progress") + query).content.decode()
        seen, _ = _first_screen(html)
        assert 'id="learning-progress"' in html and "Training your model now" in seen
        for word in JARGON:
            assert word.lower() not in seen.lower(), word


def test_the_progress_fragment_asks_again_often_only_while_something_is_under_way(
    client, alice, busy_lineage
) -> None:
    client.force_login(alice)
    url = reverse("mymodel:progress")
    chat = client.get(url + "?on=chat").content.decode()
    assert f'hx-get="{url}?on=chat"' in chat and 'hx-trigger="every 3s"' in chat
    assert f'href="{reverse("mymodel:index")}">details</a>' in chat
    TrainingUpdate.objects.filter(status="running").update(status="done")
    quiet = client.get(url + "?on=chat").content.decode()
    assert 'hx-trigger="every 60s"' in quiet
    page = client.get(reverse("mymodel:index")).content.decode()
    index = reverse("mymodel:index")
    # My model asks for itself and swaps in every part that follows learning
    assert f'hx-get="{index}" hx-select="#learning-progress"' in page
    for part in ("my-serving", "my-versions", "my-feedback", "learning-progress-details"):
        assert f'id="{part}"' in page and f"#{part}" in page


def test_the_progress_fragment_needs_a_login(client) -> None:
    response = client.get(reverse("mymodel:progress"))
    assert response.status_code == 302
