"""The cue judge for DB tests: ratings read as given, next states by their cues, no model."""

from __future__ import annotations

import pytest


class CueJudge:
    """The cue judge needs no model: ratings are read as given, next states by their cues."""

    model = "cues"

    def complete(self, messages, n, choices=None):  # pragma: no cover - never asked
        raise AssertionError("the cue judge asks no model")


@pytest.fixture
def judge(monkeypatch, settings) -> CueJudge:
    settings.JUDGE_KIND = "cues"
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a: None)
    return CueJudge()
