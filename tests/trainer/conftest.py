from __future__ import annotations

from pathlib import Path

import pytest

import bench.replay_figures
import bench.sweep
from tests.trainer.tiny import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama folder (config, safetensors, tokenizer), built once per session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict]]:
    """What the benchmarks record (``bench.common.record``), instead of the results file."""
    seen: list[tuple[str, dict]] = []
    for module in (bench.replay_figures, bench.sweep):
        monkeypatch.setattr(module, "record", lambda name, figures: seen.append((name, figures)))
    return seen
