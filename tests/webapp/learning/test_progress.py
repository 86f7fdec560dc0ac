"""Where a person's learning stands, in plain words: what Parley has from them towards the next
update, the update training now and its stage, the version live and what taught it, why the
newest one was not used, and an update that stopped; with realistic and broken records."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import AnswerFactory, FeedbackFactory, JudgementFactory, SampleFactory
from trainer.gate import GateThresholds
from webapp.learning.models import PolicyVersion, Sample, TrainingUpdate
from webapp.learning.plain_words import GENERAL_REFUSAL, refusal_words, refusals_words
from webapp.learning.preferences import learning_pause_set
from webapp.learning.progress import learning_progress, training_stage

pytestmark = [pytest.mark.django_db, pytest.mark.services]


@pytest.fixture(autouse=True)
def rules(settings):
    settings.LEARNING_SCOPE = "user"
    settings.TRAIN_BATCH_SIZE = 8
    settings.TRAIN_MAX_WAIT_S = 600
    settings.TRAIN_ALGORITHM = "combined"
    settings.TRAIN_WORKERS = 1
    settings.TRAIN_PEOPLE_PER_STEP = 1


def _feedback(owner, *, score: int = -1, hint: str = "", minutes_ago: float = 0, **kw) -> Sample:
    answer = AnswerFactory(parent__conversation__owner=owner)
    sample = SampleFactory(
        judgement__message=answer, judgement__score=score, judgement__hint=hint, **kw
    )
    if minutes_ago:
        Sample.objects.filter(pk=sample.pk).update(
            created_at=timezone.now() - timedelta(minutes=minutes_ago)
        )
    return sample


def _version(owner, number: int, status: str, samples=(), **probe) -> PolicyVersion:
    version = PolicyVersion.objects.create(
        number=number, owner=owner, status=status, adapter_path=f"/a/v{number}", probe_metrics=probe
    )
    TrainingUpdate.objects.create(
        algorithm="combined",
        owner=owner,
        status="rejected" if status == "rejected" else "done",
        produced_version=version,
        summary={"sample_ids": [s.pk for s in samples]},
    )
    return version


def test_when_nothing_waits_then_it_says_how_to_teach_parley(alice) -> None:
    progress = learning_progress(user_id=alice.pk)
    assert progress.headline == (
        "Nothing new to learn from yet: rate an answer 👍 or 👎, correct it, "
        "or just tell Parley in the chat."
    )
    assert progress.news == ["No version of your own yet: the starting model answers you."]
    assert not progress.busy


def test_when_feedback_waits_then_it_says_n_of_the_batch_and_the_minutes_left(alice, bob) -> None:
    _feedback(alice, minutes_ago=4)
    _feedback(alice, score=1)
    _feedback(alice, score=0, hint="Answer in one sentence.")  # a hint alone is a signal
    _feedback(alice, score=0)  # judged 0 with no hint: nothing to learn, not counted
    _feedback(alice, status="excluded")
    _feedback(bob)  # someone else's lineage
    progress = learning_progress(user_id=alice.pk)
    assert progress.waiting == 3
    assert progress.headline == (
        "Parley has 3 of the 8 pieces of feedback that start an update; "
        "with fewer, it starts one in about 6 minutes."
    )
    assert 5 * 60 < progress.starts_in_s <= 6 * 60


def test_when_the_batch_is_full_then_an_update_starts_in_a_moment_or_when_the_trainer_is_free(
    alice, bob
) -> None:
    for _ in range(8):
        _feedback(alice)
    progress = learning_progress(user_id=alice.pk)
    assert (progress.starts_in_s, progress.busy) == (0.0, True)
    assert progress.headline == (
        "Parley has 8 pieces of feedback to learn from: an update starts in a moment."
    )
    TrainingUpdate.objects.create(algorithm="combined", owner=bob, status="running")
    assert "as soon as the trainer is free" in learning_progress(user_id=alice.pk).headline


def test_when_the_oldest_feedback_waited_out_the_rule_then_an_update_is_due(alice) -> None:
    _feedback(alice, minutes_ago=11)
    progress = learning_progress(user_id=alice.pk)
    assert progress.starts_in_s == 0.0
    assert progress.headline.endswith("an update starts in a moment.")


def test_when_learning_is_paused_then_it_says_the_feedback_is_kept(alice) -> None:
    _feedback(alice)
    _feedback(alice)
    learning_pause_set(user=alice, paused=True)
    progress = learning_progress(user_id=alice.pk)
    assert progress.waiting == 0
    assert progress.headline == (
        "Learning is paused: Parley keeps your feedback (2 pieces so far) but learns nothing "
        "from it until you resume."
    )


def test_an_update_is_said_from_its_turn_through_each_step_to_the_check(alice) -> None:
    batch = [_feedback(alice) for _ in range(3)]
    _feedback(alice)  # arrived after the batch was fixed
    update = TrainingUpdate.objects.create(
        algorithm="combined",
        owner=alice,
        config={"steps_per_batch": 2},
        summary={"sample_ids": [s.pk for s in batch]},
    )
    progress = learning_progress(user_id=alice.pk)
    assert progress.headline == "Training your model now: waiting for its turn."
    assert progress.news[:2] == [
        "It learns from 3 pieces of feedback.",
        "1 more will go into the update after it.",
    ]
    assert progress.busy
    stages = []
    for status, metrics in (
        ("running", []),
        ("running", [{"step": 0, "loss": 0.4}]),
        ("running", [{"step": 0, "loss": 0.4}, {"step": 1, "loss": 0.3}]),
    ):
        TrainingUpdate.objects.filter(pk=update.pk).update(status=status, metrics=metrics)
        stages.append(learning_progress(user_id=alice.pk).training.stage)
    assert stages == ["getting ready", "learning, step 2 of 2", "checking the new version"]


def test_an_update_with_missing_or_odd_records_still_has_a_stage() -> None:
    assert training_stage(TrainingUpdate(status="running", metrics={}, config={})) == (
        "getting ready"
    )
    assert training_stage(TrainingUpdate(status="running", metrics=[{}], config={})) == "learning"
    odd = TrainingUpdate(status="running", metrics=[{}], config={"steps_per_batch": "2"})
    assert training_stage(odd) == "learning"


def test_when_a_version_passed_the_checks_then_it_is_going_live(alice) -> None:
    _version(alice, 4, "candidate")
    progress = learning_progress(user_id=alice.pk)
    assert progress.headline == "Version 4 passed the checks and is going live…"
    assert progress.busy


def test_when_a_version_is_live_then_it_says_what_taught_it_in_words(alice) -> None:
    liked = _feedback(alice, score=1, judgement__source="feedback", status="consumed")
    FeedbackFactory(message=liked.message, author=alice, rating=1)
    fixed = _feedback(alice, judgement__source="feedback", status="consumed")
    FeedbackFactory(message=fixed.message, author=alice, rating=-1, correction="Paris.")
    followed = _feedback(alice, judgement__source="prm", status="consumed")
    _version(alice, 6, "live", [liked, fixed, followed])
    progress = learning_progress(user_id=alice.pk)
    assert progress.news == [
        "Version 6 is live: learnt from 1 👍, 1 👎, 1 correction and 1 reply read by Parley."
    ]


def test_when_the_newest_version_was_refused_then_it_says_why_in_plain_words(alice) -> None:
    _version(alice, 6, "live")
    given_back = _feedback(alice)
    Sample.objects.filter(pk=given_back.pk).update(refusals=1)
    passed, reasons = GateThresholds().decide(
        {
            "probe_kl": 0.9,
            "probe_ppl": 10.0,
            "fresh_feedback_samples": 2.0,
            "fresh_feedback_delta": -0.4,
        },
        {"probe_ppl": 10.0},
    )
    assert not passed and len(reasons) == 2
    _version(alice, 9, "rejected", [given_back], reasons=reasons, passed=False)
    progress = learning_progress(user_id=alice.pk)
    assert progress.news[0] == (
        "Version 9 was not used: it changed too much at once from the version answering you; "
        "it did worse than the version answering you on your newest feedback. "
        "Its feedback will be tried again."
    )
    assert progress.news[1].startswith("Version 6 is live")


def test_a_refused_version_without_any_recorded_figures_says_it_did_not_pass_the_checks(
    alice,
) -> None:
    _version(alice, 8, "rejected")
    assert learning_progress(user_id=alice.pk).news[0] == (
        f"Version 8 was not used: {GENERAL_REFUSAL}."
    )


def test_when_the_last_update_failed_then_it_says_so_in_words(alice) -> None:
    _version(alice, 6, "live")
    TrainingUpdate.objects.create(
        algorithm="combined",
        owner=alice,
        status="failed",
        error="Traceback (most recent call last):\n  ...\nRuntimeError: CUDA out of memory",
    )
    progress = learning_progress(user_id=alice.pk)
    assert progress.news[0] == (
        "The last update stopped without a new version: something went wrong while it trained."
    )


@pytest.mark.parametrize(
    ("metrics", "words"),
    [
        ({"probe_ppl": 30.0}, "its language got clumsier than the starting model's"),
        ({"degenerate_repeating": 3.0}, "it gave answers that repeat themselves to test questions"),
        (
            {"degenerate_language_switch": 2.0},
            "it gave answers in the wrong language to test questions",
        ),
        ({"degenerate_cut_off": 2.0}, "it gave answers that stop mid-sentence to test questions"),
        (
            {"feedback_samples": 4.0, "feedback_delta": -0.3},
            "it did worse than the version answering you on feedback you gave earlier",
        ),
        (
            {"held_back_prompts": 4.0, "held_back_empty": 3.0},
            "it gave empty answers to questions you asked before",
        ),
    ],
)
def test_every_reason_the_gate_gives_has_plain_words(metrics, words) -> None:
    candidate = {"probe_kl": 0.01, "probe_ppl": 10.0, **metrics}
    passed, reasons = GateThresholds().decide(candidate, {"probe_ppl": 10.0})
    assert not passed
    assert refusals_words(reasons) == [words]


def test_a_reason_the_words_do_not_know_is_never_shown_raw() -> None:
    assert refusal_words("probe KL nan exceeds 0.5") != GENERAL_REFUSAL
    assert refusals_words(["a brand-new check 0.31 > 0.2"]) == [GENERAL_REFUSAL]
    assert refusals_words([]) == [GENERAL_REFUSAL]


def test_in_shared_scope_the_progress_is_the_shared_lineages(settings, alice, bob) -> None:
    settings.LEARNING_SCOPE = "shared"
    _feedback(alice)
    _feedback(bob)
    JudgementFactory()  # a judgement without a sample changes nothing
    progress = learning_progress(user_id=alice.pk)
    assert progress.waiting == 2 and not progress.personal
    assert progress.headline.startswith("Parley has 2 of the 8 pieces of feedback")
