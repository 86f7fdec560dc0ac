"""peft adapter → GGUF LoRA: names, shapes, alpha, and the q/k row order of a Llama GGUF."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from trainer.gguf_lora import AdapterFormatError, convert, permute_rows

HEADS, KV_HEADS, HIDDEN, RANK = 4, 2, 32, 4
HEAD_DIM = HIDDEN // HEADS


def _adapter(folder: Path, **config: object) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    prefix = "base_model.model.model.layers.{}.self_attn.{}.lora_{}.weight"
    outs = {"q_proj": HIDDEN, "k_proj": KV_HEADS * HEAD_DIM, "v_proj": KV_HEADS * HEAD_DIM}
    tensors = {}
    for layer in (0, 1):
        for module, out in outs.items():
            tensors[prefix.format(layer, module, "A")] = rng.normal(size=(RANK, HIDDEN))
            tensors[prefix.format(layer, module, "B")] = rng.normal(size=(out, RANK))
    tensors = {k: v.astype(np.float32) for k, v in tensors.items()}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(
        json.dumps({"r": RANK, "lora_alpha": 8, "peft_type": "LORA", **config})
    )
    return tensors


def test_the_permutation_moves_rows_within_each_head_and_back() -> None:
    weight = np.arange(HIDDEN * 2).reshape(HIDDEN, 2)
    permuted = permute_rows(weight, HEADS)
    assert sorted(permuted[:, 0].tolist()) == weight[:, 0].tolist()
    for head in range(HEADS):
        block = slice(head * HEAD_DIM, (head + 1) * HEAD_DIM)
        assert set(permuted[block, 0]) == set(weight[block, 0])  # rows stay in their head
    assert not np.array_equal(permuted, weight)


def test_conversion_writes_what_llama_cpp_reads(tmp_path: Path) -> None:
    from gguf import GGUFReader

    tensors = _adapter(tmp_path / "a")
    path = convert(tmp_path / "a", heads=HEADS, kv_heads=KV_HEADS)
    reader = GGUFReader(str(path))
    fields = {name: field for name, field in reader.fields.items()}
    assert fields["general.type"].contents() == "adapter"
    assert fields["general.architecture"].contents() == "llama"
    assert fields["adapter.type"].contents() == "lora"
    assert fields["adapter.lora.alpha"].contents() == pytest.approx(8.0)
    written = {t.name: np.asarray(t.data) for t in reader.tensors}
    assert len(written) == len(tensors)
    prefix = "base_model.model.model.layers.1.self_attn"
    q_b = tensors[f"{prefix}.q_proj.lora_B.weight"]
    np.testing.assert_array_equal(written["blk.1.attn_q.weight.lora_b"], permute_rows(q_b, HEADS))
    k_b = tensors[f"{prefix}.k_proj.lora_B.weight"]
    np.testing.assert_array_equal(
        written["blk.1.attn_k.weight.lora_b"], permute_rows(k_b, KV_HEADS)
    )
    v_b = tensors[f"{prefix}.v_proj.lora_B.weight"]
    np.testing.assert_array_equal(written["blk.1.attn_v.weight.lora_b"], v_b)
    q_a = tensors[f"{prefix}.q_proj.lora_A.weight"]
    np.testing.assert_array_equal(written["blk.1.attn_q.weight.lora_a"], q_a)


def test_a_converted_adapter_is_kept_until_its_weights_change(tmp_path: Path) -> None:
    _adapter(tmp_path / "a")
    first = convert(tmp_path / "a", heads=HEADS, kv_heads=KV_HEADS)
    stamp = first.stat().st_mtime_ns
    assert convert(tmp_path / "a", heads=HEADS, kv_heads=KV_HEADS).stat().st_mtime_ns == stamp


def test_what_cannot_be_converted_is_refused_by_name(tmp_path: Path) -> None:
    _adapter(tmp_path / "dora", use_dora=True)
    with pytest.raises(AdapterFormatError, match="DoRA"):
        convert(tmp_path / "dora", heads=HEADS, kv_heads=KV_HEADS)
    with pytest.raises(AdapterFormatError, match="no adapter_model"):
        convert(tmp_path / "empty", heads=HEADS, kv_heads=KV_HEADS)
    folder = tmp_path / "embed"
    _adapter(folder)
    save_file(
        {"base_model.model.model.embed_tokens.lora_A.weight": np.zeros((2, 2), np.float32)},
        str(folder / "adapter_model.safetensors"),
    )
    with pytest.raises(AdapterFormatError, match="embed_tokens"):
        convert(folder, heads=HEADS, kv_heads=KV_HEADS)
