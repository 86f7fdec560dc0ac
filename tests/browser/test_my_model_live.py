"""My model follows a newcomer's learning live, in headless Chromium: waiting (n of the batch) →
training (its turn, getting ready, each step, the check) → live (what taught it), with no
reload. The stages are written through the learning services against the test database (the
cue judge for the feedback, the claim, the step records, finish and publish with a fake adapter
push), so each one is certain and quick; Django's live server serves the page, which asks for
them by itself (``templates/mymodel/_progress.html``).

``PARLEY_SCREENSHOT_DIR``: where to save the screenshot docs/admin.md shows (not saved unset)."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from tests.browser.conftest import CHROMIUM
from tests.browser.test_chat_ux import _shot
from tests.factories import AnswerFactory
from tests.webapp.dashboard.test_my_model_words import JARGON
from tests.webapp.learning.updates import FakePush
from webapp.chat.feedback import feedback_rate, feedback_set
from webapp.learning.workflows import claiming, publishing, training
from webapp.learning.workflows.judging import judge_message

pytestmark = [
    pytest.mark.browser,
    pytest.mark.services,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium"),
]

STAGE_MS = 20_000  # the page asks every 3 s while busy, every 10 s otherwise


class CueJudge:
    model = "cues"

    def complete(self, messages, n, choices=None):  # pragma: no cover - never asked
        raise AssertionError("the cue judge asks no model")


@pytest.fixture
def newcomer(
    orm_beside_playwright, live_server, browser, client, django_user_model, settings, monkeypatch
):
    """A signed-in newcomer's browser page; the learning settings at their defaults."""
    settings.LEARNING_SCOPE = "user"
    settings.JUDGE_KIND = "cues"
    settings.TRAIN_BATCH_SIZE = 8
    settings.TRAIN_MAX_WAIT_S = 600
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a: None)  # no worker: the test is it
    user = django_user_model.objects.create_user("newcomer")
    client.force_login(user)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "value": client.cookies[django_settings.SESSION_COOKIE_NAME].value,
                "url": live_server.url,
            }
        ]
    )
    page = context.new_page()
    yield user, page
    context.close()


def _answer(user, question: str):
    return AnswerFactory(
        parent__conversation__owner=user, parent__content=question, content="Lyon."
    )


def _shows(page, text: str) -> None:
    page.wait_for_selector(f"#learning-progress:has-text({text!r})", timeout=STAGE_MS)


@pytest.mark.django_db(transaction=True)
def test_when_feedback_trains_a_version_then_my_model_shows_it_waiting_training_and_live(
    live_server, newcomer, tmp_path
) -> None:
    """Without a reload: the page is the one opened at the start all along."""
    user, page = newcomer
    page.goto(f"{live_server.url}/me/model/")
    page.evaluate("window.notReloaded = true")
    _shows(page, "Nothing new to learn from yet")

    # Waiting: two pieces of feedback, judged as the judge worker would.
    liked = _answer(user, "Say hi.")
    feedback_rate(message=liked, author=user, rating=1)
    fixed = _answer(user, "What is the capital of France?")
    feedback_rate(message=fixed, author=user, rating=-1)
    feedback_set(message=fixed, author=user, correction="Paris.")
    for answer in (liked, fixed):
        judge_message(answer.pk, judge=CueJudge())
    _shows(page, "Parley has 2 of the 8 pieces of feedback that start an update")
    _shows(page, "starts one in about 10 minutes")

    # Training: its turn, then getting ready, each step, the check.
    (update,) = claiming.training_updates_queue(force=True)
    _shows(page, "Training your model now: waiting for its turn.")
    update = claiming.training_update_claim(update_id=update.pk)
    _shows(page, "Training your model now: getting ready.")
    steps = update.config["steps_per_batch"]
    for step in range(steps):
        training.training_update_record_step(
            update=update, metrics={"step": step, "loss": 0.5 - 0.1 * step, "tokens": 40}
        )
        if step + 1 < steps:
            _shows(page, f"learning, step {step + 2} of {steps}.")
            _shot(page, "my-model-training")
    _shows(page, "Training your model now: checking the new version.")
    _shows(page, "It learns from 2 pieces of feedback.")
    page.wait_for_selector("#my-feedback:has-text('being learnt now')", timeout=STAGE_MS)

    # Live: finished, passed the checks, published.
    version = publishing.training_update_finish(
        update=update,
        summary={"steps": steps, "loss": 0.3},
        adapter_dir=tmp_path / "adapter",
        probe={"probe_kl": 0.01, "probe_ppl": 10.0},
        passed=True,
        reasons=[],
    )
    _shows(page, f"Version {version.number} passed the checks and is going live")
    publishing.policy_version_publish(version=version, push=FakePush())
    _shows(page, f"Version {version.number} is live: learnt from 1 👍, 1 👎 and 1 correction.")
    _shows(page, "Nothing new to learn from yet")
    # the rest of the page follows too
    page.wait_for_selector(
        f"#my-serving:has-text('version {version.number}, your own')", timeout=STAGE_MS
    )
    row = page.inner_text("#my-versions tbody tr")
    assert f"version {version.number}" in row and "answering you now" in row, row
    assert "1 👍, 1 👎 and 1 correction" in row, row
    assert "2 learnt" in page.inner_text("#my-feedback")

    assert page.evaluate("window.notReloaded") is True
    # What a reader sees without opening Details has none of the machinery's words.
    seen = page.inner_text("#my-model").lower()
    for word in JARGON:
        assert word.lower() not in seen, word
    page.click("#my-model-details summary")
    assert "lineage" in page.inner_text("#my-model-details").lower()
