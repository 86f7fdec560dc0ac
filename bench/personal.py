"""Personal models, offline: two users with conflicting preferences, each with their own
lineage, learn at the same time; then every final adapter is scored on both preferences.

    python -m bench.personal [--a starts-with-sure] [--b all-lowercase] [--feedback corrections]
                             [--versions 8] [--seeds 0 1] [--device cpu]

User A wants one thing and user B another that conflicts with it (by default "start with
'Sure!'" against "write in all lowercase": a capital S is exactly what B does not want). Each
user's runs are ``bench.replay`` runs (the trainer, the gate and the defaults of the live
system, without serving), in two processes at once. Reported per seed: each user's held-out
score on their own preference per version, and the bleed: A's final adapter scored on B's
preference against the base's score on it, and the other way round (target: within 0.1).
Targets (issue 16): each user ≥ 0.8 on their own preference within 8 of their versions.

Mode: "replay". The live system's isolation (whose adapter answers whom, whose feedback trains
which lineage) is tested in tests/webapp/learning/test_lineages.py and
tests/webapp/api/test_lineages.py; this measures whether two lineages can learn conflicting
preferences without either leaking into the other.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.answering import evaluate_splits, load_serving_model
from bench.common import ROOT, record
from bench.preferences import Preference, load_preferences, load_prompts
from bench.replay import run_replay
from bench.replay_figures import MODE, plot_if_possible, write_figures
from bench.replay_options import ReplayOptions, add_common_arguments, base_options
from trainer.threads import torch_threads

BLEED_LIMIT = 0.1
TARGET = 0.8


def _run_user(
    options: ReplayOptions, prompts: dict[str, list[str]], work: str, threads: int
) -> dict[str, Any]:
    with torch_threads(threads):
        return run_replay(options, prompts, work_dir=Path(work), progress=False)


def cross_scores(
    model_dir: Path,
    adapters: dict[str, str | None],
    preferences: list[Preference],
    splits: dict[str, list[str]],
    *,
    eval_tokens: int,
    device: str,
) -> dict[str, dict[str, dict[str, float]]]:
    """{whose model ("base", "A", "B"): {preference: {split: score}}}."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    out = {}
    for who, adapter in {"base": None, **adapters}.items():
        model = load_serving_model(model_dir, Path(adapter) if adapter else None, device)
        out[who] = evaluate_splits(
            model, tokenizer, splits, preferences, max_new_tokens=eval_tokens
        ).scores
        del model
    return out


def bleed(scores: dict[str, dict[str, dict[str, float]]], a: str, b: str) -> dict[str, float]:
    """How far each user's adapter moved the *other* user's preference from the base's."""
    result = {}
    for who, other in (("A", b), ("B", a)):
        for split, value in scores[who][other].items():
            result[f"{who} on {other} ({split})"] = round(value - scores["base"][other][split], 3)
    return result


def reached_at(versions: list[dict[str, Any]], name: str, split: str) -> int | None:
    """The first version whose score on ``split`` is at least the target, or None."""
    for v in versions:
        if v["scores"][name][split] >= TARGET:
            return v["version"]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.personal", description=__doc__.split("\n\n")[0]
    )
    add_common_arguments(parser)
    parser.add_argument("--a", default="starts-with-sure", help="user A's preference")
    parser.add_argument("--b", default="all-lowercase", help="user B's preference")
    parser.add_argument("--feedback", default="corrections")
    args = parser.parse_args(argv)
    preferences = {p.name: p for p in load_preferences(args.preference)}
    for name in (args.a, args.b):
        if name not in preferences:
            parser.error(f"no preference {name!r}; the file has {', '.join(preferences)}")
    prompts = load_prompts(args.prompts)
    common = base_options(args, preferences)
    command = "python -m bench.personal " + shlex.join(sys.argv[1:] if argv is None else argv)
    pair = [preferences[args.a], preferences[args.b]]
    splits = {n: prompts[n][: common["eval_limit"] or None] for n in common["eval_splits"]}
    context = multiprocessing.get_context("spawn")
    seeds = []
    for seed in args.seeds:
        print(f"bench | seed {seed}: A learns {args.a!r}, B learns {args.b!r}", flush=True)
        with tempfile.TemporaryDirectory(prefix="parley-personal-") as scratch:
            work = {who: Path(scratch) / who for who in ("A", "B")}
            runs = {}
            with ProcessPoolExecutor(2, mp_context=context) as pool:
                futures = {
                    who: pool.submit(
                        _run_user,
                        ReplayOptions(
                            preference=wanted,
                            feedback=args.feedback,
                            seed=seed,
                            **common,
                        ),
                        prompts,
                        str(work[who]),
                        args.threads,
                    )
                    for who, wanted in zip(("A", "B"), pair, strict=True)
                }
                runs = {who: future.result() for who, future in futures.items()}
            for figures in runs.values():
                figures["command"] = command
                write_figures(figures, args.out_dir)
            scores = cross_scores(
                common["model_dir"],
                {who: runs[who].get("live_adapter") for who in ("A", "B")},
                pair,
                splits,
                eval_tokens=common["eval_tokens"],
                device=common["device"],
            )
        seeds.append(
            {
                "seed": seed,
                "curves": {
                    who: [v["scores"][wanted.name] for v in runs[who]["versions"]]
                    for who, wanted in zip(("A", "B"), pair, strict=True)
                },
                "reached_0.8_at": {
                    who: {
                        split: reached_at(runs[who]["versions"], wanted.name, split)
                        for split in splits
                    }
                    for who, wanted in zip(("A", "B"), pair, strict=True)
                },
                "final_scores": scores,
                "bleed": bleed(scores, args.a, args.b),
            }
        )
    figures = {
        "mode": MODE,
        "command": command,
        "a": args.a,
        "b": args.b,
        "feedback": args.feedback,
        "versions": args.versions,
        "device": common["device"],
        "seeds": seeds,
    }
    record("personal", figures)  # before any plot
    print_summary(figures)
    if not args.no_plot:
        target = args.out_dir / f"personal-{args.a}-vs-{args.b}.png"
        plot_if_possible(lambda: plot(figures, target))
    return 0


def print_summary(figures: dict[str, Any]) -> None:
    for run in figures["seeds"]:
        print(f"\n[{figures['mode']}] seed {run['seed']}: A {figures['a']} · B {figures['b']}")
        for who in ("A", "B"):
            curve = " ".join(
                "/".join(f"{v:.2f}" for v in scores.values()) for scores in run["curves"][who]
            )
            print(f"  {who} per version (held-out splits): {curve}")
            print(f"  {who} reached {TARGET} at: {run['reached_0.8_at'][who]}")
        worst = max(abs(v) for v in run["bleed"].values())
        ok = "OK" if worst <= BLEED_LIMIT else "over"
        print(f"  bleed: {run['bleed']} -> largest {worst:.2f} ({ok}, limit {BLEED_LIMIT})")


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4.5))
    for run in figures["seeds"]:
        for who, name, style in (("A", figures["a"], "-"), ("B", figures["b"], "--")):
            first_split = next(iter(run["curves"][who][0]))
            values = [scores[first_split] for scores in run["curves"][who]]
            axis.plot(
                range(len(values)),
                values,
                style,
                marker=".",
                label=f"user {who}: {name} ({first_split}), seed {run['seed']}",
            )
    axis.axhline(TARGET, color="grey", linewidth=0.8)
    axis.set(xlabel="the user's version", ylabel="held-out score", ylim=(-0.05, 1.05))
    axis.set_title(f"[{figures['mode']}] two users, two lineages, conflicting preferences")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"bench | plot: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    raise SystemExit(main())
