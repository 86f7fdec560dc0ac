"""Many people at once: feedback → live against the number of people and of train workers.

    python -m bench.many_users [--people 10 100 1000] [--workers 1 2] [--duration 60]

Simulated people give feedback at a steady rate (a Poisson process each); Parley's real
scheduler (``workflows.claiming``), PostgreSQL, Redis broker and Celery train workers turn it
into updates, finishes and publishes into serving replicas. Only the trainer is modelled: an
update takes ``--update-s`` seconds (``bench.modelled_training``), time-compressed like the
rates and the batch wait, so that 1,000 people fit a run of a minute. The benchmark starts
its own PostgreSQL and Redis in a scratch folder, so it runs beside a ``make run``.

Reported per run: feedback → live p50/p99 (a sample's creation to the publish of the version
that trained it) and the feedback still waiting at the end (shown, not dropped), the oldest
waiting feedback's age, the most updates running at once and any two of one lineage that
overlapped (must be 0), the scheduling rounds a lineage waited behind others after its batch
was due, and the adapters each serving replica held. A table and a plot (``--plot``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, record
from bench.many_users_figures import BATCH
from bench.many_users_run import COMPRESSION


def in_scratch_infra(module: str) -> int:
    """Start a scratch PostgreSQL and Redis, run ``python -m module --inner`` with this
    command's arguments inside them."""
    from bench.launching import clean_env

    var = Path(tempfile.mkdtemp(prefix="parley-many-users-"))
    env = clean_env(PARLEY_VAR_DIR=str(var), PARLEY_LEARNING_SCOPE="user")
    env.pop("PARLEY_EMBEDDED", None)
    command = [sys.executable, "-m", module, "--inner", *sys.argv[1:]]
    print(f"bench | scratch PostgreSQL and Redis in {var}", flush=True)
    launcher = [sys.executable, "-m", "webapp.infra.launcher", "exec", "--", *command]
    return subprocess.run(launcher, cwd=ROOT, env=env, check=False).returncode


def django_compressed() -> None:
    """Django set up in the scratch database, migrated, with the batch size and the batch wait
    (time-compressed) the scheduling benchmarks run with."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ["PARLEY_TRAIN_MAX_WAIT_S"] = str(round(600 / COMPRESSION))
    os.environ["PARLEY_TRAIN_BATCH_SIZE"] = str(BATCH)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)


def _inner(args: argparse.Namespace) -> int:
    django_compressed()
    from bench.many_users_run import Replicas, simulate

    rows: list[dict[str, Any]] = []
    with Replicas(count=args.replicas) as replicas:
        for people in args.people:
            for workers in args.workers:
                figures = simulate(
                    people=people,
                    workers=workers,
                    duration_s=args.duration,
                    rate_per_s=args.rate,
                    update_s=args.update_s,
                    replicas=replicas,
                )
                rows.append(figures)
                record("many_users", figures)
    _print_table(rows)
    if args.plot:
        _plot(rows, Path(args.plot))
    return 0


def _print_table(rows: list[dict[str, Any]]) -> None:
    print()
    print(
        "| people | train workers | feedback | live p50 / p99 (s) | waiting at end "
        "| oldest wait max (s) | updates at once | same-lineage overlaps "
        "| rounds behind max | adapters per replica (max) |"
    )
    print("| " + " | ".join(["---"] * 10) + " |")
    for row in rows:
        print(
            f"| {row['people']} | {row['workers']} | {row['feedback']} "
            f"| {row['live_p50_s']:.1f} / {row['live_p99_s']:.1f} | {row['waiting_at_end']} "
            f"| {row['oldest_wait_max_s']:.1f} | {row['max_parallel']} "
            f"| {row['same_lineage_overlaps']} | {row['rounds_behind_max']:.1f} "
            f"| {row['resident_end']} ({row['resident_max']}) |"
        )
    print(
        f"\nTimes are benchmark seconds; ×{COMPRESSION:.0f} gives the modelled real time "
        "(an update of 25 s, a batch wait of 600 s)."
    )


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for workers in sorted({row["workers"] for row in rows}):
        mine = sorted((r for r in rows if r["workers"] == workers), key=lambda r: r["people"])
        people = [r["people"] for r in mine]
        ax.plot(
            people,
            [r["live_p50_s"] * COMPRESSION / 60 for r in mine],
            "o-",
            label=f"p50, {workers} worker(s)",
        )
        ax.plot(
            people,
            [r["live_p99_s"] * COMPRESSION / 60 for r in mine],
            "s--",
            label=f"p99, {workers} worker(s)",
        )
    ax.set_xscale("log")
    ax.set_xlabel("people giving feedback")
    ax.set_ylabel("feedback → live (modelled minutes)")
    ax.set_title("Feedback to a live version, by people and train workers")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"bench | plot: {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of feedback")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0025,
        help="feedback per person per benchmark second (0.0025: one every 5.5 modelled hours)",
    )
    parser.add_argument("--update-s", type=float, default=0.5, help="modelled update + gate")
    parser.add_argument("--replicas", type=int, default=2, help="serving replicas (fake)")
    parser.add_argument("--plot", default=str(ROOT / "docs" / "many_users.png"))
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return _inner(args) if args.inner else in_scratch_infra("bench.many_users")


if __name__ == "__main__":
    raise SystemExit(main())
