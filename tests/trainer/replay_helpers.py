"""What the replay, sweep and two-user benchmark tests share: a preference, tiny run
arguments, a looping answer, options for a tiny model, a call recorder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bench.common
import bench.replay
import bench.replay_figures
import bench.replay_options
import bench.sweep
from bench.preferences import Preference

SURE = Preference.from_dict(
    {
        "name": "sure",
        "comment": "Please always start your answer with 'Sure!'",
        "rules": {"starts_with": "Sure!"},
        "fix": {"prepend": "Sure! "},
    }
)


TINY = ["--versions", "2", "--batch-size", "2", "--gen-tokens", "4", "--eval-tokens", "4"]
TINY += ["--eval-limit", "2", "--quiet"]


LOOP = "Sure!\n\nSure!\n\nSure!\n\nSure!\n\nSure!"


LOOP_IDS = [34355, 17, 198, 198] * 4 + [34355, 17]  # as SmolLM2 encodes it: a 4-token loop


def tiny_options(model_dir: Path, **changes: Any) -> bench.replay_options.ReplayOptions:
    """A replay on the tiny model: two answers per update, four-token answers, one prompt."""
    settings: dict[str, Any] = {"batch_size": 2, "gen_tokens": 4, "eval_tokens": 4}
    settings |= {"eval_limit": 1, "eval_splits": ("held_out",)}
    return bench.replay_options.ReplayOptions(
        model_dir=model_dir, preference=SURE, **{**settings, **changes}
    )


def spy(function, order: list[str], label: str):
    def wrapper(*args, **kwargs):
        order.append(label)
        return function(*args, **kwargs)

    return wrapper
