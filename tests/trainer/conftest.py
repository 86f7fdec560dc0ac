from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer.tiny import build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama folder (config, safetensors, tokenizer), built once per session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
