"""The offline replay's figures: what a run records, how its file is named, its summary, plot
and table."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import record
from bench.replay_memory import MEMORY_FORM, WITHOUT_MEMORY
from bench.replay_options import (
    ANSWER_TOKENS,
    BATCH_SIZE,
    GATE_FRESH_SAMPLES,
    GATE_HOLDOUT_SAMPLES,
    GATE_MAX_DEGENERATE_EXTRA,
    GATE_MAX_PPL_RATIO,
    JUDGE,
    PROBE_TOKENS,
    ReplayOptions,
)
from trainer.refusals import MAX_REFUSALS, REFUSAL_LR_FACTOR

MODE = "replay"
SCORING = "meets-v2"
"""How answers were scored: "meets-v2" counts a broken answer (``answer_flaws``) as a miss and
the simulated user dislikes it; runs without the field counted every answer that satisfied the
rule, loops included."""


def figures_of(
    options: ReplayOptions,
    config: Any,
    splits: dict[str, list[str]],
    turns: int,
    met: int,
    judge: dict[str, int],
    versions: list[dict[str, Any]],
    started: float,
) -> dict[str, Any]:
    """A run's figures (what ``bench/results/replay-*.json`` holds)."""
    done = len(versions) - 1
    figures: dict[str, Any] = {
        "mode": MODE,
        "preference": options.preference.name,
        "second_preference": options.second_preference.name if options.second_preference else None,
        "switch_after": options.switch_after if options.second_preference else None,
        "feedback": options.feedback,
        "algorithm": options.algorithm,
        "seed": options.seed,
        "batch_size": options.batch_size,
        "temperature": options.temperature,
        "gen_tokens": options.gen_tokens,
        "eval_tokens": options.eval_tokens,
        "eval_prompts": {name: len(items) for name, items in splits.items()},
        "device": options.device,
        "overrides": dict(options.overrides),
        "config": dataclasses.asdict(config),
        "gate": {
            "max_kl": options.gate_max_kl,
            "max_ppl_ratio": options.gate_max_ppl_ratio,
            "max_degenerate_extra": options.max_degenerate_extra,
            "max_repeating_extra": options.max_repeating_extra,
            "holdout": options.holdout,
            "fresh": options.fresh,
        },
        "probe_tokens": options.probe_tokens,
        "refusal_policy": {"lr_factor": REFUSAL_LR_FACTOR, "max_refusals": MAX_REFUSALS},
        "scoring": SCORING,
        "turns": turns,
        "answers_meeting_preference": met,
        "judge": judge,
        "judge_kind": options.judge,
        "language": options.language,
        "versions": versions,
        "summary": summarise(versions, options.preference.name),
        "seconds": time.perf_counter() - started,
        "seconds_per_version": (time.perf_counter() - started) / max(done, 1),
    }
    if "score_without_memory" in versions[0]:  # feedback "memory" (bench.replay_memory)
        figures["memory"] = options.preference.comment
        figures["memory_form"] = MEMORY_FORM
        figures["base_score"] = versions[0]["score_without_memory"]
    return figures


def candidate_figures(
    summary: dict[str, Any], *, passed: bool, reasons: Sequence[str]
) -> dict[str, Any]:
    """One candidate's entry from its update's summary: the gate's verdict, the step and
    perplexity figures, and what it measured on the held-back and fresh feedback."""
    probe, base_probe = summary["probe"], summary["base_probe"]
    return {
        "published": bool(passed),
        "reasons": list(reasons),
        "probe_kl": probe.get("probe_kl"),
        "probe_kl_base": probe.get("probe_kl_base"),
        "ppl_ratio": probe["probe_ppl"] / base_probe["probe_ppl"],
        "train_seconds": summary.get("seconds"),
        "gate_seconds": summary.get("gate_seconds"),
        "loss": summary.get("loss"),
        # how far the candidate still needs each memory in its prompt (trainer.memory_gap)
        **({"memory_gaps": summary["memory_gaps"]} if "memory_gaps" in summary else {}),
        "held_back": {
            key: probe[key]
            for key in sorted(probe)
            if key.startswith(("held_back", "feedback_", "fresh_feedback_"))
        }
        | {
            key.replace("held_back_", "held_back_base_"): value
            for key, value in base_probe.items()
            if key.startswith("held_back_")
        },
    }


SERVED_FIGURES = (
    "scores",
    "flawed",
    "broken_examples",
    "missed_examples",
    "witness_ppl_ratio",
    *(f"{key}_without_memory" for key in WITHOUT_MEMORY),
    "score",
    "score_without_memory",
)


def still_served(previous: dict[str, Any]) -> dict[str, Any]:
    """A version that published nothing: the live version's evaluation stays what users get
    (its scores, broken and missed answers, witness perplexity), carried to this entry."""
    return {key: previous[key] for key in SERVED_FIGURES if key in previous}


def summarise(versions: list[dict[str, Any]], preference: str) -> dict[str, Any]:
    """Per split: the score at v0, at v8 and v16 (when reached), the best and when it came."""
    result: dict[str, Any] = {
        # of the versions served (a refused candidate's perplexity is why it was refused)
        "worst_ppl_ratio": max(
            v["ppl_ratio"] for v in versions if v["ppl_ratio"] is not None and v["published"]
        ),
        "refused": [v["version"] for v in versions if not v["published"]],
        # every sample with a signal is trained (by a published version), waiting, or excluded
        "trained": sum(v.get("samples", 0) for v in versions[1:] if v["published"]),
        "waiting": versions[-1].get("waiting", 0),
        "excluded": sum(v.get("excluded", 0) for v in versions),
        # the share of broken (looping, empty) held-out answers of the versions served
        "worst_flawed": max(
            (max(v["flawed"].values()) for v in versions if v.get("flawed") and v["published"]),
            default=None,
        ),
        # the served versions' perplexity on text neither the gate nor the anchor sees
        # (bench.witness); None for runs recorded before it was measured
        "worst_witness_ppl_ratio": max(
            (v["witness_ppl_ratio"] for v in versions if v.get("witness_ppl_ratio") is not None),
            default=None,
        ),
        # how far the served lineage went from the base, KL per probe answer token: the gate
        # limits each step (KL to the live version), never this distance
        "farthest_from_base_kl": max(
            (
                v["probe_kl_base"]
                for v in versions
                if v.get("probe_kl_base") is not None and v["published"]
            ),
            default=None,
        ),
    }
    for split in versions[0]["scores"][preference]:
        series = [v["scores"][preference][split] for v in versions]
        best = max(series)
        result[split] = {
            "v0": series[0],
            "last": series[-1],
            "best": best,
            "best_at": series.index(best),
            **{f"v{n}": series[n] for n in (8, 16, 32) if n < len(series)},
        }
    return result


_STEM_TAGS = {"max_degenerate_extra": "degenerate", "probe_tokens": "probe"}
_STEM_TAGS |= {"max_repeating_extra": "repeating"}
_STEM_TAGS |= {"gate_max_ppl_ratio": "gateppl"}
_STEM_TAGS |= {"gen_tokens": "gen", "eval_tokens": "eval", "holdout": "holdout"}
_STEM_TAGS |= {"fresh": "fresh", "judge_kind": "judge-", "language": "lang-"}


def replay_settings(figures: dict[str, Any]) -> dict[str, Any]:
    """The replay's own settings (not UpdateConfig fields) a run changed from the defaults, in
    a fixed order: they name its file (``write_figures``) and its table row (``bench.sweep``)."""
    defaults = {
        "batch_size": BATCH_SIZE,
        "max_degenerate_extra": GATE_MAX_DEGENERATE_EXTRA,
        "max_repeating_extra": None,
        "gate_max_ppl_ratio": GATE_MAX_PPL_RATIO,
        "probe_tokens": PROBE_TOKENS,
        "gen_tokens": ANSWER_TOKENS,
        "eval_tokens": ANSWER_TOKENS,
        "holdout": GATE_HOLDOUT_SAMPLES,
        "fresh": GATE_FRESH_SAMPLES,
        "judge_kind": JUDGE,
        "language": "en",
    }
    used = {key: figures.get(key, default) for key, default in defaults.items()}
    gate = figures.get("gate") or {}
    used["max_degenerate_extra"] = gate.get("max_degenerate_extra", GATE_MAX_DEGENERATE_EXTRA)
    used["max_repeating_extra"] = gate.get("max_repeating_extra")
    used["gate_max_ppl_ratio"] = gate.get("max_ppl_ratio", GATE_MAX_PPL_RATIO)
    used["holdout"] = gate.get("holdout", 0)  # older runs held nothing back
    # a run recorded without the field left no fresh samples (named where it held any back)
    used["fresh"] = gate.get("fresh", 0 if gate.get("holdout") else GATE_FRESH_SAMPLES)
    return {key: value for key, value in used.items() if value != defaults[key]}


def write_figures(figures: dict[str, Any], out_dir: Path, *, record_line: bool = True) -> Path:
    """The JSON file and the bench/results.jsonl line: always before any plot."""
    out_dir.mkdir(parents=True, exist_ok=True)
    second = f"-then-{figures['second_preference']}" if figures["second_preference"] else ""
    stem = (
        f"replay-{figures['preference']}{second}-{figures['feedback']}-{figures['algorithm']}"
        f"-s{figures['seed']}"
    )
    changed = replay_settings(figures)
    if "batch_size" in changed:
        stem += f"-batch{changed.pop('batch_size')}"
    if figures["overrides"]:
        stem += "-" + "-".join(f"{k}{v}" for k, v in sorted(figures["overrides"].items()))
    stem += "".join(f"-{_STEM_TAGS[key]}{value}" for key, value in changed.items())
    if figures.get("device", "cpu") != "cpu":
        stem += f"-{figures['device']}"
    path = out_dir / f"{stem}.json"
    path.write_text(json.dumps(figures, indent=2) + "\n")
    if record_line:
        record("replay", figures)
    return path


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6, 4))
    xs = [v["version"] for v in figures["versions"]]
    for name, by_split in figures["versions"][0]["scores"].items():
        for split in by_split:
            ys = [v["scores"][name][split] for v in figures["versions"]]
            axis.plot(xs, ys, marker="o", label=f"{name} / {split}")
    axis.set(
        xlabel="version",
        ylabel="held-out score",
        ylim=(-0.05, 1.05),
        title=f"[{figures['mode']}] {figures['feedback']}, {figures['algorithm']}",
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_if_possible(draw: Callable[[], None]) -> bool:
    """Draw when matplotlib is installed (the test environment); say so when it is not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench | matplotlib is not installed: no plot drawn (the figures are recorded)")
        return False
    draw()
    return True


def format_run(figures: dict[str, Any]) -> str:
    lines = [
        f"[{figures['mode']}] {figures['preference']} · {figures['feedback']} · "
        f"{figures['algorithm']} · seed {figures['seed']}"
    ]
    splits = list(figures["versions"][0]["scores"][figures["preference"]])
    # feedback "memory": the scores are as served, memory in the prompt; this one without it
    bare = "base_score" in figures
    lines.append(
        f"{'version':>8}{'turns':>7}"
        + "".join(f"{s:>16}" for s in splits)
        + (f"{'without memory':>16}" if bare else "")
        + f"{'ppl/base':>10}  gate"
    )
    for v in figures["versions"]:
        name = v.get("preference", figures["preference"])
        cells = "".join(f"{v['scores'][name][s]:>16.2f}" for s in splits)
        cells += f"{v['score_without_memory']:>16.2f}" if bare else ""
        gate_text = "base" if v["version"] == 0 else ("published" if v["published"] else "refused")
        label = f"v{v['version']}"
        lines.append(f"{label:>8}{v['turns']:>7}{cells}{v['ppl_ratio']:>10.3f}  {gate_text}")
    lines.append(f"{figures['seconds_per_version']:.0f} s per version")
    return "\n".join(lines)


def spread(values: Sequence[float]) -> str:
    """mean ± half the range (the spread over seeds), or the one value."""
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {(max(values) - min(values)) / 2:.2f}"
