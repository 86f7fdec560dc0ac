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
import itertools
import json
import multiprocessing
import shlex
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import record
from bench.preferences import Preference, load_preferences, load_prompts
from bench.replay import run_replay
from bench.replay_figures import MODE, plot_if_possible, write_figures
from bench.replay_options import (
    ReplayOptions,
    add_common_arguments,
    base_options,
    parse_overrides,
)
from bench.simulated_user import FEEDBACK_KINDS
from bench.sweep_labels import run_label as run_label  # read here by the sweep's tests
from bench.sweep_labels import settings_label
from bench.sweep_table import cell_row, collect, load_runs, markdown, plot_rows
from trainer.threads import torch_threads

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
