"""What a sweep's row is named by: the settings a replay run changed from today's defaults, and
the marks of runs scored or gated by older rules, so runs made under different rules never
share a row."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.replay_figures import SCORING, replay_settings

OLD_SCORING = " (loops counted)"
"""The mark of a run scored before ``SCORING``: a loop that met the rule counted as learnt,
and it retried refused samples forever at the full rate (no refusal policy)."""


def settings_label(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"


HOW_COMPUTED = ("seed", "algorithm", "micro_batch_size", "micro_batch_tokens")
HOW_COMPUTED += ("gradient_checkpointing", "base_dtype")
"""UpdateConfig fields that name a run's cell or say how it computed (memory, precision on a
GPU), not what it learnt with: never part of a row's settings."""


def config_changes(figures: dict[str, Any]) -> dict[str, Any]:
    """The UpdateConfig fields a run trained with that differ from today's defaults.

    Read from the full config the run recorded, so an older run made when a default was
    different is named by it (``batch_baseline=False`` when that was the default) and an
    override that has since become the default is not named: "defaults" in a table always
    means today's. A run that recorded no config is named by its overrides that differ."""
    from trainer.config import UpdateConfig

    today = dataclasses.asdict(UpdateConfig())
    recorded = figures.get("config") or {}
    used = {**recorded, **(figures.get("overrides") or {})}
    changes = {}
    for key, value in used.items():
        if key in HOW_COMPUTED or key not in today:
            continue
        default, recorded_value = today[key], value
        if isinstance(default, tuple):  # as JSON recorded it: a list
            default, recorded_value = list(default), list(value)
        if recorded_value != default:
            changes[key] = value
    return changes


def run_label(figures: dict[str, Any]) -> str:
    """The settings a run changed from today's defaults (``config_changes``, then the replay's
    own); a run scored before broken answers counted as misses says so, so it never shares a
    row with one scored after."""
    label = figures.get("settings_label") or settings_label(
        {**config_changes(figures), **replay_settings(figures)}
    )
    return scored_label(label, figures)


def _with_setting(label: str, alone: str, joined: str) -> str:
    """The label naming one more setting: ``alone`` in place of "defaults", else ``joined``
    after the others, the scoring mark kept last."""
    marked = label.endswith(OLD_SCORING)
    base = label.removesuffix(OLD_SCORING)
    base = alone if base == "defaults" else f"{base}, {joined}"
    return base + (OLD_SCORING if marked else "")


def scored_label(label: str, figures: dict[str, Any]) -> str:
    """The label, marked when the run was scored before broken answers counted as misses, and
    naming ``holdout=0`` for a run whose gate held nothing back and ``fresh=0`` for one that
    held back without leaving fresh samples, even where a sweep stored its label without it."""
    gate = figures.get("gate") or {}
    if not gate.get("holdout") and "holdout=" not in label:
        label = _with_setting(label, "holdout=0", "holdout=0")
    if gate.get("holdout") and "fresh" not in gate and "fresh=" not in label:
        # held back, but before updates left their newest samples for the next (fresh=0)
        label = _with_setting(label, "fresh=0", "fresh=0")
    if gate.get("holdout_live_batch") and "live batch" not in label:
        # runs whose holdout still held the live version's own batch (marked in their files)
        label = _with_setting(label, "holdout incl. live batch", "live batch held")
    old = figures.get("scoring") != SCORING and not label.endswith(OLD_SCORING)
    return f"{label}{OLD_SCORING}" if old else label
