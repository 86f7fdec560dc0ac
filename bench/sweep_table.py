"""A sweep's table from its replay runs: the runs read back, grouped into cells (settings ×
algorithm × feedback × preference), one row of figures over the seeds per cell, the markdown
table and the optional plot of the mean curves."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.replay_figures import MODE, spread, summarise
from bench.sweep_labels import run_label


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
