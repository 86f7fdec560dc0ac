"""Personalization benchmark: does Parley learn what one user keeps asking for?

A simulated user talks to Parley through its OpenAI API (the `openai` package), one session per
topic, and gives feedback as a person would: 👍 when an answer meets their preference, 👎 (and,
with --feedback comments|corrections, the preference's comment and a corrected answer) when it
misses. The live loop judges, trains and publishes on its own. After each published version the
held-out prompts are answered at temperature 0 and scored by the preference's checker; the
quality guard is each version's probe perplexity relative to the base (from the probe gate).

    python manage.py bench_personalize --preference bench/data/preferences.json \
        --name starts-with-sure --algorithm combined --feedback comments --versions 8

A second user, the control, has their own key and gives no feedback. After each published
version both users ask the held-out prompts through ``/v1`` with ``model="parley"``: the
learner's answers come from their own lineage (``PARLEY_LEARNING_SCOPE=user``, the default),
the control's from the shared one, which the learner's feedback must not move (issue 16: one
user teaches, the other still gets the model as it was).

Outputs a terminal table and a line in bench/results.jsonl, then bench/results/personalize-*.json
and, where matplotlib is installed, a PNG plot next to it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.common import ROOT, record, running_system
from bench.live_learner import Run, simulate
from bench.preferences import load_preferences, load_prompts
from bench.replay_figures import SCORING, plot_if_possible
from trainer.algorithms import ALGORITHMS
from trainer.config import UpdateConfig


def plot(run: Run, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [v.version for v in run.versions]
    left.plot(xs, [v.score for v in run.versions], marker="o", label="the learner (their adapter)")
    controls = [
        (v.version, v.control_via_api) for v in run.versions if v.control_via_api is not None
    ]
    if controls:
        left.plot(
            [x for x, _ in controls],
            [y for _, y in controls],
            marker="s",
            linestyle="--",
            label="the control user (no feedback), same prompts",
        )
        left.legend(fontsize=7)
    left.set(
        xlabel="published version",
        ylabel="held-out score",
        ylim=(0, 1.05),
        title=f"{run.preference}: score per version",
    )
    right.plot(
        [v.feedback_turns for v in run.versions], [v.score for v in run.versions], marker="o"
    )
    right.set(
        xlabel="feedback turns",
        ylabel="held-out score",
        ylim=(0, 1.05),
        title=f"{run.algorithm}, feedback: {run.feedback}",
    )
    from matplotlib.ticker import MaxNLocator

    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="manage.py bench_personalize", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--preference", type=Path, default=ROOT / "bench" / "data" / "preferences.json"
    )
    parser.add_argument("--name", default="starts-with-sure", help="which preference of the file")
    parser.add_argument("--prompts", type=Path, default=ROOT / "bench" / "data" / "prompts.json")
    parser.add_argument("--algorithm", choices=list(ALGORITHMS), default="combined")
    parser.add_argument(
        "--feedback",
        choices=["thumbs", "comments", "corrections", "memory"],
        default="corrections",
        help="memory: the preference stated once as a memory, then only new questions",
    )
    parser.add_argument("--turns", type=int, default=128, help="most feedback turns")
    parser.add_argument("--versions", type=int, default=16, help="stop after this many versions")
    parser.add_argument("--batch-size", type=int, default=8, help="samples per update")
    parser.add_argument("--eval-tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.0, help="override the update's learning rate")
    parser.add_argument("--steps", type=int, default=0, help="override optimizer steps per update")
    parser.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="leave out the second user (no feedback) whose answers must not change",
    )
    parser.add_argument(
        "--tag", default="", help="a word in the output files' names, so a run keeps its own"
    )
    args = parser.parse_args(argv)
    preferences = {p.name: p for p in load_preferences(args.preference)}
    if args.name not in preferences:
        parser.error(f"no preference {args.name!r}; the file has {', '.join(preferences)}")
    preference = preferences[args.name]
    prompts = load_prompts(args.prompts)
    env = {
        "PARLEY_TRAIN_ALGORITHM": args.algorithm,
        "PARLEY_TRAIN_BATCH_SIZE": str(args.batch_size),
        "PARLEY_TRAIN_MAX_WAIT_S": "100000",
        "PARLEY_SESSION_IDLE_MINUTES": "100000",
        "PARLEY_TRAIN_LR": str(args.lr or ""),
        "PARLEY_TRAIN_STEPS": str(args.steps or ""),
    }
    with running_system(env) as system:
        control_key = (
            system.manage("create_api_key", "--user", "control", "--create-user").strip()
            if args.control
            else None
        )
        run = simulate(
            system,
            preference,
            prompts,
            algorithm=args.algorithm,
            feedback=args.feedback,
            turns=args.turns,
            versions=args.versions,
            seed=args.seed,
            eval_tokens=args.eval_tokens,
            batch_size=args.batch_size,
            control_key=control_key,
        )
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"personalize-{run.preference}-{run.algorithm}-{run.feedback}"
    stem += f"-{args.tag}" if args.tag else ""
    stem += f"-s{args.seed}" if args.seed else ""
    print(
        f"\n{'version':>8}{'turns':>8}{'score':>8}{'ppl/base':>10}{'minutes':>9}"
        f"{'own /v1':>10}{'control':>10}"
    )
    for v in run.versions:
        ratio = f"{v.ppl_ratio:.3f}" if v.ppl_ratio else "—"
        label = f"v{v.version}"
        minutes = v.seconds / 60
        api = "".join(
            f"{x:>10.2f}" if x is not None else f"{'—':>10}"
            for x in (v.own_via_api, v.control_via_api)
        )
        print(f"{label:>8}{v.feedback_turns:>8}{v.score:>8.2f}{ratio:>10}{minutes:>9.1f}{api}")
        if v.score_without_memory is not None:
            print(f"{'':>8}{'':>8}{v.score_without_memory:>8.2f}  (without the memory)")
    first, best = run.versions[0].score, max(v.score for v in run.versions)
    worst_ppl = max((v.ppl_ratio or 1.0) for v in run.versions)
    target = best >= 0.8 or best - first >= 0.5
    print(
        f"score {first:.2f} → best {best:.2f} within {len(run.versions) - 1} versions "
        f"(target ≥ 0.8 or +0.5: {'met' if target else 'not met'}); "
        f"worst perplexity {worst_ppl:.3f}× base (target ≤ 1.10)"
    )
    result = {
        "preference": run.preference,
        "algorithm": run.algorithm,
        "feedback": run.feedback,
        "turns": run.turns,
        "thumbs_up": run.thumbs_up,
        "versions": [vars(v) for v in run.versions],
        # without memory at version 0: the base model as a newcomer meets it
        "base_score": run.versions[0].score_without_memory
        if run.feedback == "memory"
        else run.versions[0].score,
        "target_met": target,
        "worst_ppl_ratio": worst_ppl,
        "rejected_by_gate": run.rejected,
        "lr": args.lr or f"default ({UpdateConfig().lr:g})",
        "steps_per_update": args.steps or "default (2)",
        "batch_size": args.batch_size,
        "scoring": SCORING,
    }
    record("personalize", result)  # the figures first: the plot needs a test-only package
    (out_dir / f"{stem}.json").write_text(json.dumps(result, indent=2))
    print(f"bench | wrote bench/results/{stem}.json")
    if plot_if_possible(lambda: plot(run, out_dir / f"{stem}.png")):
        print(f"bench | plot: bench/results/{stem}.png")
    return 0
