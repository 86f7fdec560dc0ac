"""The offline replay's options: its defaults (the webapp's, from the same dataclasses), the
base model folder, the command-line arguments the replay, the sweep and the two-user run share,
and the trainer's config for a run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import ROOT
from bench.preferences import Preference
from bench.simulated_user import LANGUAGES
from trainer.claim import ClaimRules
from trainer.gate import GateThresholds
from trainer.judge import JUDGE_KINDS

# The webapp's defaults (its PARLEY_TRAIN_* / PARLEY_GATE_* settings start from the same
# dataclasses); the replay reads no Django settings.
GATE_MAX_KL = GateThresholds.max_kl
GATE_MAX_PPL_RATIO = GateThresholds.max_ppl_ratio
GATE_MAX_FEEDBACK_DROP = GateThresholds.max_feedback_drop
GATE_MAX_DEGENERATE_EXTRA = GateThresholds.max_degenerate_extra
GATE_HOLDOUT_SAMPLES = ClaimRules.holdout
"""Recent judged samples with a sign, outside the update, that the gate scores each candidate
on (its feedback score and its answers' loops). Runs recorded without the field held none."""
GATE_FRESH_SAMPLES = ClaimRules.fresh
"""The newest judged samples with a sign that each update leaves for the next one, so the gate
scores the candidate on feedback no version has trained on. Runs recorded without it left none."""
BATCH_SIZE = ClaimRules.batch_size
JUDGE = "cues"
"""The webapp's default judge (PARLEY_JUDGE)."""
ANSWER_TOKENS = 48
"""Most tokens of a simulated answer and of a scored held-out answer, unless set."""
PROBE_TOKENS = 24  # the webapp's probe answers (train_and_probe's max_new_tokens)
DISLIKE_ALTERNATIVES = 3
"""Answers sampled beside a bare 👎 (the webapp's PARLEY_DISLIKE_ALTERNATIVES)."""
CHAT_TEMPERATURE = 0.7


def default_model_dir(env: Mapping[str, str] | None = None) -> Path:
    """The base model folder a system with this environment serves (default: this process's)."""
    env = os.environ if env is None else env
    base = env.get("PARLEY_BASE_MODEL")
    if base:
        return Path(base).expanduser()
    models = Path(env.get("PARLEY_MODELS_DIR", ROOT / "var" / "models"))
    return models / "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class ReplayOptions:
    model_dir: Path
    preference: Preference
    feedback: str = "corrections"
    algorithm: str = "combined"
    versions: int = 8
    batch_size: int = BATCH_SIZE
    seed: int = 0
    temperature: float = CHAT_TEMPERATURE
    gen_tokens: int = ANSWER_TOKENS
    eval_tokens: int = ANSWER_TOKENS
    eval_splits: tuple[str, ...] = ("held_out", "held_out_other")
    eval_limit: int = 0  # 0: every prompt of each split
    overrides: dict[str, Any] = field(default_factory=dict)  # UpdateConfig fields to change
    gate_max_kl: float = GATE_MAX_KL
    gate_max_ppl_ratio: float = GATE_MAX_PPL_RATIO
    second_preference: Preference | None = None  # the user changes their mind ...
    switch_after: int = 0  # ... after this many versions
    probe_tokens: int = PROBE_TOKENS
    max_degenerate_extra: int = GATE_MAX_DEGENERATE_EXTRA
    max_repeating_extra: int | None = None  # None: max_degenerate_extra, as in the webapp
    holdout: int = GATE_HOLDOUT_SAMPLES  # 0: the gate sees no held-back feedback
    fresh: int = GATE_FRESH_SAMPLES  # 0: every waiting sample is trained at once
    device: str = "cpu"  # "cuda": the same fp32 arithmetic on a GPU (labelled in the figures)
    judge: str = JUDGE  # the webapp's PARLEY_JUDGE: "cues", or "hindsight" (trainer.hindsight)
    language: str = "en"  # what a "followups" user writes in: en, de or zh
    alternatives: int = DISLIKE_ALTERNATIVES  # answers sampled beside a bare 👎 (0: none)


def update_config(options: ReplayOptions) -> Any:
    """UpdateConfig's defaults, with the algorithm, the seed and any explicit override. On a
    GPU the base stays fp32 without gradient checkpointing, so the arithmetic is the CPU's."""
    from trainer.config import UpdateConfig

    same_as_cpu = (
        {"base_dtype": "float32", "gradient_checkpointing": False}
        if options.device != "cpu"
        else {}
    )
    return UpdateConfig(
        **{
            "algorithm": options.algorithm,
            "seed": options.seed,
            **same_as_cpu,
            **options.overrides,
        }
    )


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["lr=1e-3", "steps_per_batch=4"]`` → UpdateConfig overrides (JSON values, else text)."""
    from trainer.config import UpdateConfig

    known = {f.name for f in dataclasses.fields(UpdateConfig)}
    overrides: dict[str, Any] = {}
    for item in items:
        key, _, text = item.partition("=")
        if key not in known or not text:
            raise ValueError(f"{item!r}: use FIELD=VALUE with a field of UpdateConfig")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    return overrides


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preference", type=Path, default=ROOT / "bench" / "data" / "preferences.json"
    )
    parser.add_argument("--prompts", type=Path, default=ROOT / "bench" / "data" / "prompts.json")
    parser.add_argument("--model-dir", type=Path, default=None, help="base model folder")
    parser.add_argument("--versions", type=int, default=8, help="updates per run")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="answers per update")
    parser.add_argument("--temperature", type=float, default=CHAT_TEMPERATURE)
    parser.add_argument(
        "--gen-tokens", type=int, default=ANSWER_TOKENS, help="most tokens per answer"
    )
    parser.add_argument("--eval-tokens", type=int, default=ANSWER_TOKENS)
    parser.add_argument("--eval-splits", default="held_out,held_out_other")
    parser.add_argument("--eval-limit", type=int, default=0, help="prompts per split (0: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (0: torch's own). 1 by default: on a 2-core machine shared with other "
        "work, two threads generated 5x slower than one (measured)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--holdout",
        type=int,
        default=GATE_HOLDOUT_SAMPLES,
        help="held-back samples the gate checks each candidate on, as PARLEY_GATE_HOLDOUT_SAMPLES "
        "(0: none)",
    )
    parser.add_argument(
        "--fresh",
        type=int,
        default=GATE_FRESH_SAMPLES,
        help="newest samples each update leaves for the next, to score the candidate on feedback "
        "no version trained on, as PARLEY_GATE_FRESH_SAMPLES (0: none)",
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda: the same fp32 arithmetic on a GPU"
    )
    parser.add_argument(
        "--judge", choices=JUDGE_KINDS, default=JUDGE, help="the next-state judge (PARLEY_JUDGE)"
    )
    parser.add_argument(
        "--language", choices=LANGUAGES, default="en", help="what a followups user writes in"
    )
    parser.add_argument(
        "--alternatives",
        type=int,
        default=DISLIKE_ALTERNATIVES,
        help="answers sampled beside a bare 👎, as PARLEY_DISLIKE_ALTERNATIVES (0: none)",
    )


def base_options(args: argparse.Namespace, preferences: dict[str, Preference]) -> dict[str, Any]:
    return {
        "model_dir": args.model_dir or default_model_dir(),
        "versions": args.versions,
        "batch_size": args.batch_size,
        "temperature": args.temperature,
        "gen_tokens": args.gen_tokens,
        "eval_tokens": args.eval_tokens,
        "eval_splits": tuple(s for s in args.eval_splits.split(",") if s),
        "eval_limit": args.eval_limit,
        "device": args.device,
        "holdout": args.holdout,
        "fresh": args.fresh,
        "judge": args.judge,
        "language": args.language,
        "alternatives": args.alternatives,
    }
