"""The update config the webapp stores with each update: UpdateConfig's defaults and the
PARLEY_TRAIN_* overrides."""

from __future__ import annotations

from trainer.config import UpdateConfig
from webapp.learning.workflows.claiming import update_config


def test_the_defaults_are_the_trainers(settings) -> None:
    settings.TRAIN_LR, settings.TRAIN_STEPS, settings.TRAIN_REFINE_MAX_TOKENS = None, None, -1
    config = update_config()
    assert config["lr"] == UpdateConfig().lr == 1e-3
    assert config["refine_max_tokens"] == UpdateConfig().refine_max_tokens == 64
    assert config["batch_baseline"] == UpdateConfig().batch_baseline


def test_settings_override_the_learning_rate_steps_and_refinement(settings) -> None:
    settings.TRAIN_LR, settings.TRAIN_STEPS, settings.TRAIN_REFINE_MAX_TOKENS = 3e-4, 4, 0
    config = update_config()
    assert (config["lr"], config["steps_per_batch"], config["refine_max_tokens"]) == (3e-4, 4, 0)


def test_the_batch_baseline_can_be_turned_either_way(settings) -> None:
    for value in (True, False):
        settings.TRAIN_BATCH_BASELINE = value
        assert update_config()["batch_baseline"] is value
