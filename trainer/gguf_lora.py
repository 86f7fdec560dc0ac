"""A peft LoRA adapter as a GGUF LoRA file, for llama.cpp to apply over a GGUF base model.

llama.cpp loads a LoRA at run time from its own format: a GGUF with ``general.type`` "adapter",
``adapter.type`` "lora", ``adapter.lora.alpha``, and for each adapted weight the pair
``<gguf name>.lora_a`` (peft's ``lora_A``, rank × in) and ``<gguf name>.lora_b`` (peft's
``lora_B``, out × rank). It scales the product by alpha / rank as peft does.

One thing differs from a plain renaming: a Llama GGUF stores the query and key projections
with their rows permuted (the rotary embedding's halves interleaved per head), so the
output side of a LoRA on ``q_proj`` / ``k_proj`` (``lora_B``'s rows) is permuted the same way,
or the adapter would add to the wrong rows. The test compares llama.cpp's logits with the
adapter against peft's on the real model.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

GGUF_NAME = "adapter.gguf"
ARCHITECTURE = "llama"
_MODULES = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}
_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


class AdapterFormatError(ValueError):
    """The folder is not a peft LoRA adapter this converter can turn into GGUF."""


def permute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Rows of a q/k projection in the GGUF order: each head's two rotary halves interleaved.

    >>> permute_rows(np.arange(8).reshape(8, 1), heads=2)[:, 0].tolist()
    [0, 2, 1, 3, 4, 6, 5, 7]
    """
    rows = weight.shape[0]
    half = rows // heads // 2
    return weight.reshape(heads, 2, half, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def convert(adapter_dir: str | Path, *, heads: int, kv_heads: int) -> Path:
    """Write ``adapter_dir/adapter.gguf`` from the peft adapter in ``adapter_dir``; its path.

    ``heads`` and ``kv_heads``: the base model's attention and key-value head counts. A GGUF
    already there and newer than the weights is kept (a publish converts once).
    """
    from gguf import GGUFWriter
    from safetensors.numpy import load_file

    folder = Path(adapter_dir)
    weights_path = folder / "adapter_model.safetensors"
    target = folder / GGUF_NAME
    if not weights_path.exists():
        raise AdapterFormatError(f"{folder}: no adapter_model.safetensors")
    if target.exists() and target.stat().st_mtime >= weights_path.stat().st_mtime:
        return target
    config = json.loads((folder / "adapter_config.json").read_text())
    if config.get("use_rslora") or config.get("use_dora"):
        raise AdapterFormatError(f"{folder}: rsLoRA and DoRA adapters are not supported")
    tensors = load_file(str(weights_path))
    handle, name = tempfile.mkstemp(dir=folder, prefix=".adapter-", suffix=".partial")
    os.close(handle)
    partial = Path(name)  # one per writer: two servers converting one folder never collide
    writer = GGUFWriter(str(partial), ARCHITECTURE)
    writer.add_type("adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(config["lora_alpha"]))
    for key in sorted(tensors, key=_order):
        match = _KEY.search(key)
        if match is None or match.group(2) not in _MODULES:
            raise AdapterFormatError(f"{folder}: cannot place tensor {key} in a GGUF model")
        layer, module, side = match.groups()
        value = tensors[key].astype(np.float32)
        if side == "B" and module in ("q_proj", "k_proj"):
            value = permute_rows(value, heads if module == "q_proj" else kv_heads)
        name = f"blk.{layer}.{_MODULES[module]}.weight.lora_{side.lower()}"
        writer.add_tensor(name, np.ascontiguousarray(value))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(partial, target)
    return target


def _order(key: str) -> tuple[int, str]:
    match = _KEY.search(key)
    return (int(match.group(1)), key) if match else (-1, key)
