"""Model preparation refuses damaged files with one clear line, and its output really loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tests.helpers import ROOT
from trainer.base_model import (
    ModelError,
    check_gguf,
    check_model_folder,
    check_safetensors,
    fetch_gguf,
)


def _tiny_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    save_file({"w": torch.zeros(64, 64)}, str(folder / "model.safetensors"))
    return folder


def test_an_intact_safetensors_folder_passes(tmp_path: Path) -> None:
    check_model_folder(_tiny_folder(tmp_path))


def test_a_truncated_weights_file_is_refused_with_its_name(tmp_path: Path) -> None:
    folder = _tiny_folder(tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(ModelError) as caught:
        check_model_folder(folder)
    message = str(caught.value)
    assert str(weights) in message and "truncated" in message
    assert "\n" not in message


def test_garbage_weights_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "model.safetensors"
    garbage.write_bytes(b"\xff" * 4096)
    with pytest.raises(ModelError, match="corrupt"):
        check_safetensors(garbage)


def test_a_missing_folder_names_the_setting_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="PARLEY_BASE_MODEL"):
        check_model_folder(tmp_path / "nope")


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"<html>rate limited</html>" * 10)
    with pytest.raises(ModelError, match="not a GGUF file"):
        check_gguf(fake)


def test_a_truncated_gguf_is_refused(prepared_model: Path, tmp_path: Path) -> None:
    source = fetch_gguf(cache_dir=ROOT / "var" / "cache")  # a no-op once cached
    cut = tmp_path / source.name
    with source.open("rb") as src, cut.open("wb") as dst:
        dst.write(src.read(60_000_000))
    with pytest.raises(ModelError, match=r"truncated|corrupt"):
        check_gguf(cut)


def test_prepared_folder_loads_in_transformers_and_answers(prepared_model: Path) -> None:
    from trainer.base_model import generate_sample

    assert "paris" in generate_sample(prepared_model).lower()


def test_prepare_model_is_a_no_op_the_second_time(prepared_model: Path) -> None:
    from trainer.base_model import prepare_base_model

    result = prepare_base_model(
        target=prepared_model, cache_dir=prepared_model.parent.parent / "cache"
    )
    assert result.converted is False


def test_a_corrupted_copy_of_the_real_model_is_refused(
    prepared_model: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(prepared_model, copy)
    weights = copy / "model.safetensors"
    with weights.open("r+b") as handle:
        handle.truncate(weights.stat().st_size // 2)
    with pytest.raises(ModelError, match=r"model\.safetensors"):
        check_model_folder(copy)
