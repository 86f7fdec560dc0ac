"""Sweeps and ablations in the offline replay mode (``bench.replay``): a grid of settings ×
algorithms × feedback kinds × preferences × seeds, one replay run per cell and seed.

    # settings: any UpdateConfig field, batch_size (answers per update), and the replay's
    # gate and probe knobs max_degenerate_extra and probe_tokens
    python -m bench.sweep --names starts-with-sure all-lowercase \
        --feedback corrections comments --seeds 0 1 \
        --grid lr=1e-4,3e-4,1e-3 --grid steps_per_batch=2,4
    # the ablation of OpenClaw-RL's Table 3: algorithm × feedback, at 8 and 16 versions
    python -m bench.sweep --algorithms rl opd combined \
        --feedback thumbs comments corrections next_state --versions 16 --report-at 8 16

Each run's figures are written as ``bench.replay`` writes them (a JSON file and a line in
``bench/results.jsonl``) as soon as it ends; the table (mean ± half the range over seeds) is
printed, written as markdown to ``bench/results/sweep-*.md`` and recorded, all before the
optional plot. Every row says which mode it came from: "replay".
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import multiprocessing
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import record
from bench.preferences import Preference, load_preferences, load_prompts
from bench.replay import (
    MODE,
    SCORING,
    ReplayOptions,
    add_common_arguments,
    base_options,
    parse_overrides,
    plot_if_possible,
    replay_settings,
    run_replay,
    spread,
    summarise,
    torch_threads,
    write_figures,
)
from bench.simulated_user import FEEDBACK_KINDS

REPLAY_SETTINGS = ("batch_size", "max_degenerate_extra", "probe_tokens", "gate_max_ppl_ratio")
REPLAY_SETTINGS += ("max_repeating_extra", "holdout", "fresh")
"""Grid keys that are the replay's own (ReplayOptions), not UpdateConfig fields."""
_FLOAT_SETTINGS = ("gate_max_ppl_ratio",)


def parse_grid(items: Sequence[str]) -> list[dict[str, Any]]:
    """``["lr=1e-4,3e-4", "steps_per_batch=2,4"]`` → every combination as a dict of settings."""
    axes: list[tuple[str, list[Any]]] = []
    for item in items:
        key, _, values = item.partition("=")
        if not values:
            raise ValueError(f"{item!r}: use FIELD=V1,V2,...")
        parsed = [
            (float(v) if key in _FLOAT_SETTINGS else int(v))
            if key in REPLAY_SETTINGS
            else parse_overrides([f"{key}={v}"])[key]
            for v in values.split(",")
        ]
        axes.append((key, parsed))
    return [
        dict(zip([k for k, _ in axes], combo, strict=True))
        for combo in itertools.product(*(values for _, values in axes))
    ] or [{}]


OLD_SCORING = " (loops counted)"
"""The mark of a run scored before ``SCORING``: a loop that met the rule counted as learnt,
and it retried refused samples forever at the full rate (no refusal policy)."""


def settings_label(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"


HOW_COMPUTED = ("seed", "algorithm", "micro_batch_size", "micro_batch_tokens")
HOW_COMPUTED += ("gradient_checkpointing", "base_dtype")
"""UpdateConfig fields that name a run's cell or say how it computed (memory, precision on a
GPU), not what it learnt with: never part of a row's settings."""


def config_changes(figures: dict[str, Any]) -> dict[str, Any]:
    """The UpdateConfig fields a run trained with that differ from today's defaults.

    Read from the full config the run recorded, so an older run made when a default was
    different is named by it (``batch_baseline=False`` before the sixteenth session) and an
    override that has since become the default is not named: "defaults" in a table always
    means today's. A run that recorded no config is named by its overrides that differ."""
    from trainer.config import UpdateConfig

    today = dataclasses.asdict(UpdateConfig())
    recorded = figures.get("config") or {}
    used = {**recorded, **(figures.get("overrides") or {})}
    changes = {}
    for key, value in used.items():
        if key in HOW_COMPUTED or key not in today:
            continue
        default, recorded_value = today[key], value
        if isinstance(default, tuple):  # as JSON recorded it: a list
            default, recorded_value = list(default), list(value)
        if recorded_value != default:
            changes[key] = value
    return changes


def run_label(figures: dict[str, Any]) -> str:
    """The settings a run changed from today's defaults (``config_changes``, then the replay's
    own); a run scored before broken answers counted as misses says so, so it never shares a
    row with one scored after."""
    label = figures.get("settings_label") or settings_label(
        {**config_changes(figures), **replay_settings(figures)}
    )
    return scored_label(label, figures)


def _with_setting(label: str, alone: str, joined: str) -> str:
    """The label naming one more setting: ``alone`` in place of "defaults", else ``joined``
    after the others, the scoring mark kept last."""
    marked = label.endswith(OLD_SCORING)
    base = label.removesuffix(OLD_SCORING)
    base = alone if base == "defaults" else f"{base}, {joined}"
    return base + (OLD_SCORING if marked else "")


def scored_label(label: str, figures: dict[str, Any]) -> str:
    """The label, marked when the run was scored before broken answers counted as misses, and
    naming ``holdout=0`` for a run whose gate held nothing back (every run before the tenth
    session) and ``fresh=0`` for one that held back before updates left fresh samples (before
    the fourteenth), even where an older sweep stored its label without it."""
    gate = figures.get("gate") or {}
    if not gate.get("holdout") and "holdout=" not in label:
        label = _with_setting(label, "holdout=0", "holdout=0")
    if gate.get("holdout") and "fresh" not in gate and "fresh=" not in label:
        # held back, but before updates left their newest samples for the next (fresh=0)
        label = _with_setting(label, "fresh=0", "fresh=0")
    if gate.get("holdout_live_batch") and "live batch" not in label:
        # the tenth session's first held-back runs, before the live version's own batch was
        # left out of the holdout (marked by hand in their files)
        label = _with_setting(label, "holdout incl. live batch", "live batch held")
    old = figures.get("scoring") != SCORING and not label.endswith(OLD_SCORING)
    return f"{label}{OLD_SCORING}" if old else label


def load_runs(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The single-preference replay runs among ``paths`` (finished or stopped early), each
    labelled with the settings it changed."""
    runs = []
    for path in paths:
        figures = json.loads(path.read_text())
        if not isinstance(figures, dict):  # a sweep's own table (a list of rows)
            continue
        if figures.get("mode") != MODE or figures.get("second_preference"):
            continue
        # a label stored by an older sweep lacks the scoring mark: run_label adds it
        figures["settings_label"] = run_label(figures)
        runs.append(figures)
    return runs


def collect(
    runs: Sequence[dict[str, Any]], splits: Sequence[str], report_at: Sequence[int]
) -> list[dict]:
    """Table rows from replay runs already written (``load_runs``), one per cell."""
    cells: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for figures in runs:
        key = (
            figures["settings_label"],
            figures["algorithm"],
            figures["feedback"],
            figures["preference"],
        )
        cells.setdefault(key, []).append(figures)
    return [
        cell_row(sorted(group, key=lambda r: r["seed"]), splits, report_at)
        for _, group in sorted(cells.items())
    ]


def cell_row(
    runs: list[dict[str, Any]], splits: Sequence[str], report_at: Sequence[int]
) -> dict[str, Any]:
    """One table row from the seeds' runs of one cell."""
    first = runs[0]
    name = first["preference"]
    row: dict[str, Any] = {
        "mode": MODE,
        "settings": first["settings_label"],
        "algorithm": first["algorithm"],
        "feedback": first["feedback"],
        "preference": name,
        "seeds": [r["seed"] for r in runs],
    }
    for split in splits:
        row[f"{split}@0"] = [
            r["versions"][0]["scores"][name][split]
            for r in runs
            if split in r["versions"][0]["scores"][name]
        ]
        for n in report_at:
            row[f"{split}@{n}"] = [
                r["versions"][n]["scores"][name][split]
                for r in runs
                if n < len(r["versions"]) and split in r["versions"][n]["scores"][name]
            ]
        row[f"{split} best"] = [r["summary"][split]["best"] for r in runs if split in r["summary"]]
    row["judge"] = {key: sum(r["judge"][key] for r in runs) for key in ("right", "parsed", "votes")}
    row["worst ppl×"] = [summarise(r["versions"], name)["worst_ppl_ratio"] for r in runs]
    witnessed = [summarise(r["versions"], name)["worst_witness_ppl_ratio"] for r in runs]
    row["worst witness ppl×"] = [value for value in witnessed if value is not None]
    row["refused"] = [len(r["summary"]["refused"]) for r in runs]
    # runs from before the refusal policy retried forever at the full rate: no figure
    row["excluded"] = [
        summarise(r["versions"], name)["excluded"] for r in runs if r.get("refusal_policy")
    ]
    broken = [summarise(r["versions"], name)["worst_flawed"] for r in runs]
    row["worst broken"] = [value for value in broken if value is not None]
    row["s/version"] = [r["seconds_per_version"] for r in runs]
    return row


def markdown(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = ["mode", "settings", "algorithm", "feedback", "preference", "seeds", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["mode"], row["settings"], row["algorithm"], row["feedback"], row["preference"]]
        cells.append(str(len(row["seeds"])))
        for column in columns:
            values = row.get(column, [])
            if column in ("worst ppl×", "worst witness ppl×"):
                cells.append(f"{max(values):.3f}" if values else "—")
            elif column == "worst broken":
                cells.append(f"{max(values):.2f}" if values else "—")
            elif column == "excluded":
                cells.append(str(sum(values)) if values else "—")
            elif column == "refused":
                cells.append(str(sum(values)))
            elif column == "judge right/parsed/votes":
                judge = row["judge"]
                cells.append(
                    f"{judge['right']}/{judge['parsed']}/{judge['votes']}"
                    if judge["votes"]
                    else "—"
                )
            elif column == "s/version":
                cells.append(f"{statistics.fmean(values):.0f}" if values else "—")
            else:  # a score: say so when only some seeds' runs got that far
                cell = spread(values)
                if 0 < len(values) < len(row["seeds"]):
                    cell += f" ({len(values)}/{len(row['seeds'])})"
                cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_rows(runs: list[dict[str, Any]], split: str, path: Path) -> None:
    """The mean curve over seeds of each cell; one panel per feedback kind when there are
    several (an ablation: the algorithms side by side under each kind of feedback)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({run["feedback"] for run in runs})
    fig, axes = plt.subplots(
        1, len(kinds), figsize=(3.6 * len(kinds) + 1.5, 4), sharey=True, squeeze=False
    )
    for axis, kind in zip(axes[0], kinds, strict=True):
        cells: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for run in runs:
            if run["feedback"] == kind:
                key = (run["settings_label"], run["algorithm"], run["preference"])
                cells.setdefault(key, []).append(run)
        for key, group in sorted(cells.items()):
            length = min(len(r["versions"]) for r in group)
            means = [
                statistics.fmean(r["versions"][i]["scores"][key[2]][split] for r in group)
                for i in range(length)
            ]
            label = " · ".join(k for k in key if k != "defaults") + f" ({len(group)} seeds)"
            axis.plot(range(length), means, marker=".", label=label)
        axis.set(xlabel="version", title=kind, ylim=(-0.05, 1.05))
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6)
    axes[0][0].set_ylabel(f"{split} score (mean over seeds)")
    fig.suptitle(f"[{MODE}] {split}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sweep", description=__doc__.split("\n\n")[0]
    )
    add_common_arguments(parser)
    parser.add_argument("--names", nargs="+", default=["starts-with-sure"], help="preferences")
    parser.add_argument("--feedback", nargs="+", choices=FEEDBACK_KINDS, default=["corrections"])
    parser.add_argument("--algorithms", nargs="+", default=["combined"])
    parser.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2")
    parser.add_argument("--report-at", type=int, nargs="+", default=[8])
    parser.add_argument("--label", default="", help="name of the markdown table file")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at once, each in its own process (a GPU box: one per CPU core)",
    )
    parser.add_argument(
        "--collect",
        type=Path,
        nargs="+",
        default=[],
        help="make the table from replay runs already written (their JSON files); runs nothing",
    )
    args = parser.parse_args(argv)
    preferences = {p.name: p for p in load_preferences(args.preference)}
    unknown = [n for n in args.names if n not in preferences]
    if unknown:
        parser.error(f"no preference {unknown}; the file has {', '.join(preferences)}")
    try:
        grid = parse_grid(args.grid)
    except ValueError as error:
        parser.error(str(error))
    command = "python -m bench.sweep " + shlex.join(sys.argv[1:] if argv is None else argv)
    if args.collect:
        splits = [s for s in args.eval_splits.split(",") if s]
        runs = load_runs(args.collect)
        return write_table(args, collect(runs, splits, args.report_at), runs, splits, command)
    with torch_threads(args.threads):
        return _sweep(args, preferences, grid, command)


def _sweep(
    args: argparse.Namespace,
    preferences: dict[str, Preference],
    grid: list[dict[str, Any]],
    command: str,
) -> int:
    prompts = load_prompts(args.prompts)
    common = base_options(args, preferences)
    runs: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    splits = list(common["eval_splits"])
    cells = list(itertools.product(grid, args.algorithms, args.feedback, args.names))
    jobs = []
    for number, (settings, algorithm, feedback, name) in enumerate(cells, 1):
        overrides = {k: v for k, v in settings.items() if k not in REPLAY_SETTINGS}
        replay_settings = {k: v for k, v in settings.items() if k in REPLAY_SETTINGS}
        for seed in args.seeds:
            title = (
                f"cell {number}/{len(cells)}: {settings_label(settings)} · "
                f"{algorithm} · {feedback} · {name} · seed {seed}"
            )
            options = ReplayOptions(
                preference=preferences[name],
                feedback=feedback,
                algorithm=algorithm,
                seed=seed,
                overrides=overrides,
                **{**common, **replay_settings},
            )
            jobs.append(Job(title, options, settings_label(settings), command, args.out_dir))
    if args.jobs > 1:
        # Spawned processes (CUDA cannot fork); each writes its run's file as it ends.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
            done = list(pool.map(run_job, jobs, itertools.repeat((prompts, False, args.threads))))
    else:
        done = [run_job(job, (prompts, not args.quiet, 0)) for job in jobs]
    per_seed = len(args.seeds)
    for start in range(0, len(done), per_seed):
        cell_runs = done[start : start + per_seed]
        runs.extend(cell_runs)
        rows.append(cell_row(cell_runs, splits, args.report_at))
    return write_table(args, rows, runs, splits, command)


@dataclass(frozen=True)
class Job:
    """One replay run of a sweep: a cell's settings with one seed."""

    title: str
    options: ReplayOptions
    settings_label: str
    command: str
    out_dir: Path


def run_job(job: Job, how: tuple[dict[str, list[str]], bool, int]) -> dict[str, Any]:
    """Run one replay and write its figures (in this process or a pool's)."""
    prompts, progress, threads = how
    print(f"bench | {job.title}", flush=True)
    slug = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in job.title.split(": ")[-1])
    partial = job.out_dir / "partial" / f"{slug}.json"
    with torch_threads(threads):
        figures = run_replay(job.options, prompts, progress=progress, partial=partial)
    figures.update(command=job.command, settings_label=job.settings_label)
    write_figures(figures, job.out_dir)
    partial.unlink(missing_ok=True)
    print(f"bench | done {job.title} in {figures['seconds']:.0f} s", flush=True)
    return figures


def write_table(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    splits: list[str],
    command: str,
) -> int:
    """Print the table, write it as markdown and JSON, record it; then the optional plots."""
    columns = [f"{s}@0" for s in splits]
    columns += [f"{s}@{n}" for n in args.report_at for s in splits]
    columns += ["worst ppl×", "worst witness ppl×", "worst broken", "refused", "excluded"]
    columns += ["judge right/parsed/votes"]
    columns += ["s/version"]
    table = markdown(rows, columns)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"sweep-{args.label or stamp}.md"
    path.write_text(
        f"Mode: {MODE} (offline replay, `bench.replay`). Command:\n\n    {command}\n\n"
        f"Scores: share of held-out answers that meet the preference, mean ± half the range "
        f"over seeds.\n\n{table}\n"
    )
    print(table)
    print(f"bench | wrote {path}")
    (args.out_dir / f"{path.stem}.json").write_text(json.dumps(rows, indent=2) + "\n")
    record("replay_sweep", {"mode": MODE, "command": command, "rows": rows, "table": str(path)})
    if not args.no_plot and runs:
        for split in splits:
            target = path.with_name(f"{path.stem}-{split}.png")
            plot_if_possible(lambda s=split, t=target: plot_rows(runs, s, t))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
